'use strict'

// Every code block of the README and of the guides in docs/ lives where it runs or type-checks,
// so that they cannot drift from the code: each ```js / ```ts block verbatim in __test__/types/
// (type-checked by types.test.js) or examples/ (run by their tests), and each ```sh block's
// commands are scripts of package.json or files of the repository. Their relative links (the
// README into docs/, the guides back and to each other) lead to a file and a heading that exist.

const { it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
// The README and the guides in docs/.
const documents = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)]
const blocks = documents.flatMap((document) => {
  const text = fs.readFileSync(path.join(root, document), 'utf8')
  return [...text.matchAll(/^```(\w*)\n(.*?)^```$/gms)].map(([, lang, code]) => ({ lang, code, line: `${document}:${text.slice(0, text.indexOf(code)).split('\n').length}` }))
})

const sources = ['__test__/types', 'examples']
  .flatMap((dir) => fs.readdirSync(path.join(root, dir)).filter((file) => /\.(c|m)?(j|t)s$/.test(file)).map((file) => path.join(root, dir, file)))
  .map((file) => fs.readFileSync(file, 'utf8'))

it('every block is labelled with its language', () => {
  assert.ok(blocks.length >= 20, `${blocks.length} blocks`)
  for (const { lang, line } of blocks) assert.ok(['js', 'ts', 'sh', 'text'].includes(lang), `${line}: \`\`\`${lang}`)
})

it('every JavaScript and TypeScript block is in __test__/types/ or examples/, verbatim', () => {
  for (const { lang, code, line } of blocks.filter((block) => block.lang === 'js' || block.lang === 'ts')) {
    assert.ok(sources.some((source) => source.includes(code)), `${line} is in no file of __test__/types/ or examples/:\n${code}`)
  }
})

it('every shell block runs scripts of package.json and files that exist', () => {
  const { scripts } = require('../package.json')
  for (const { code, line } of blocks.filter((block) => block.lang === 'sh')) {
    for (const command of code.split('\n').flatMap((text) => text.replace(/#.*/, '').split('&&')).map((text) => text.trim()).filter(Boolean)) {
      const script = command.match(/^npm (?:run )?(\w[\w:-]*)/)
      if (script && !['install', 'i'].includes(script[1])) assert.ok(scripts[script[1]], `${line}: no script ${script[1]}`)
      const file = command.match(/^node (\S+\.m?js)/)
      if (file) assert.ok(fs.existsSync(path.join(root, file[1])), `${line}: no file ${file[1]}`)
    }
  }
})

// GitHub's anchor for a heading: lower case, punctuation (backticks, colons, ...) dropped, spaces
// as hyphens; a repeated heading gets -1, -2, ...
function anchorsOf(text) {
  const seen = new Map()
  return text.replace(/^```.*?^```$/gms, '').split('\n').filter((line) => /^#{1,6} /.test(line)).map((line) => {
    const slug = line.replace(/^#+ /, '').trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    return count ? `${slug}-${count}` : slug
  })
}

// The framework guides are being written beside this README; a link to one is checked once it exists.
const pendingGuides = new Set(['docs/fastify.md', 'docs/nestjs.md', 'docs/hono.md', 'docs/koa.md'])

it('every relative link points to a file of the repository, and to a heading of it', () => {
  let links = 0
  for (const document of documents) {
    const text = fs.readFileSync(path.join(root, document), 'utf8')
    for (const [, target] of text.replace(/^```.*?^```$/gms, '').matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue // https:, mailto:
      links++
      const [file, anchor] = target.split('#')
      const resolved = file ? path.posix.join(path.posix.dirname(document), file) : document
      if (pendingGuides.has(resolved) && !fs.existsSync(path.join(root, resolved))) continue
      assert.ok(fs.existsSync(path.join(root, resolved)), `${document}: ${target}: no file ${resolved}`)
      if (anchor) assert.ok(anchorsOf(fs.readFileSync(path.join(root, resolved), 'utf8')).includes(anchor), `${document}: ${target}: no heading #${anchor} in ${resolved}`)
    }
  }
  assert.ok(links >= 40, `${links} links`)
})
