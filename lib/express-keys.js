'use strict'

/**
 * The middleware's default key: the client's IP address, with an IPv6 address grouped by its
 * subnet (one IPv6 client commonly holds a /64 or more: counting each address apart would give
 * it millions of budgets). The same keys as express-rate-limit 8's `ipKeyGenerator`, without its
 * `ip-address` dependency: tested against it.
 */

/** node:net, loaded on the first request (loading it costs a few ms at startup). */
let net = null
const isIPv6 = (ip) => (net ??= require('node:net')).isIPv6(ip)

const GROUPS = 8
const BITS = 128n

/**
 * The key of `ip`: an IPv4 address as it is; an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`,
 * `::ffff:102:304`) or one in the deprecated IPv4-compatible notation (`::1.2.3.4`) as the IPv4
 * address it holds; any other IPv6 address as its `/subnet` network in RFC 5952 form
 * (`2001:db8:1:200::/56`), or as it is when `subnet` is `false`.
 */
function ipKey(ip, subnet) {
  if (typeof ip !== 'string' || !isIPv6(ip)) return ip
  const zone = ip.indexOf('%')
  const { value, dotted } = parseIPv6(zone === -1 ? ip : ip.slice(0, zone))
  const upper96 = value >> 32n
  if (upper96 === 0xffffn || (dotted && upper96 === 0n)) return ipv4Of(value)
  if (subnet === false) return ip
  const mask = ((1n << BigInt(subnet)) - 1n) << (BITS - BigInt(subnet))
  return `${formatIPv6(value & mask)}/${subnet}`
}

/** An IPv6 address that node:net accepts (zone removed) as a 128-bit number; `dotted` when it ends in an IPv4 address. */
function parseIPv6(text) {
  const dotted = text.includes('.')
  let groups
  const gap = text.indexOf('::')
  if (gap === -1) {
    groups = splitGroups(text)
  } else {
    const head = splitGroups(text.slice(0, gap))
    const tail = splitGroups(text.slice(gap + 2))
    groups = [...head, ...new Array(GROUPS - head.length - tail.length).fill(0), ...tail]
  }
  let value = 0n
  for (const group of groups) value = (value << 16n) | BigInt(group)
  return { value, dotted }
}

/** The 16-bit groups of a run of `a:b:c` (the last may be a dotted IPv4 address: two groups). */
function splitGroups(text) {
  if (text === '') return []
  const groups = []
  for (const part of text.split(':')) {
    if (part.includes('.')) {
      const [a, b, c, d] = part.split('.').map(Number)
      groups.push((a << 8) | b, (c << 8) | d)
    } else {
      groups.push(parseInt(part, 16))
    }
  }
  return groups
}

function ipv4Of(value) {
  return [24n, 16n, 8n, 0n].map((shift) => Number((value >> shift) & 0xffn)).join('.')
}

/** RFC 5952: lower-case hex without leading zeros, the first longest run of 2+ zero groups as `::`. */
function formatIPv6(value) {
  const groups = []
  for (let i = GROUPS - 1; i >= 0; i--) groups.push(Number((value >> BigInt(16 * i)) & 0xffffn))
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < GROUPS; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let end = i
    while (end < GROUPS && groups[end] === 0) end++
    if (end - i > bestLength) {
      bestStart = i
      bestLength = end - i
    }
    i = end
  }
  const hex = (list) => list.map((group) => group.toString(16)).join(':')
  if (bestStart === -1) return hex(groups)
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`
}

module.exports = { ipKey }
