// The original callback API's callback in every form a TypeScript app writes for a Node-style
// callback (under `--strict`): parameters inferred, annotated as Node's own types do
// (`Error | null`), with fewer parameters, optional ones, and the precise tuple form that narrows
// `timeLeft` once `err` is checked. Compiled by types.test.js under `module: commonjs` and
// `module: nodenext`.
import RateLimiter = require('../..')

const limiter = RateLimiter({ interval: 1000, maxInInterval: 10 })
const log = (...values: unknown[]): void => console.log(...values)

// Inferred: `err` is `Error | null`, `timeLeft` and `actionsLeft` numbers.
limiter('user', (err, timeLeft) => {
  if (err) log(err.message)
  else if (timeLeft > 0) log('wait', timeLeft)
})
limiter('user', (err, timeLeft, actionsLeft) => log(err?.message, timeLeft + 1, actionsLeft + 1))
limiter('user', (err) => log(err))
limiter((err, timeLeft) => log(err, timeLeft))

// Annotated.
limiter('user', (err: Error | null, timeLeft: number) => log(err, timeLeft))
limiter('user', (err: Error | null, timeLeft: number, actionsLeft: number) => log(err, timeLeft, actionsLeft))
limiter('user', (err: Error | null, timeLeft?: number) => log(err, timeLeft ?? 0))
limiter('user', (err: Error | null, timeLeft?: number, actionsLeft?: number) => log(err, timeLeft, actionsLeft))
limiter('user', (err?: Error | null, timeLeft?: number) => log(err, timeLeft))
limiter('user', (err: unknown, timeLeft: number) => log(err, timeLeft))
// eslint-disable-next-line @typescript-eslint/no-explicit-any
limiter('user', (err: any, timeLeft: any) => log(err, timeLeft))
limiter(undefined, (err: Error | null, timeLeft: number) => log(err, timeLeft))

// A named function, and a callback typed with the exported type.
function onLimit(err: Error | null, timeLeft: number, actionsLeft: number): void {
  log(err, timeLeft, actionsLeft)
}
limiter('user', onLimit)
const typed: RateLimiter.LimiterCallback = (err, timeLeft) => log(err, timeLeft)
limiter('user', typed)

// The precise form: `timeLeft` is `undefined` when `err` is set, a number once it is checked.
const precise: RateLimiter.PreciseLimiterCallback = (...[err, timeLeft, actionsLeft]) => {
  if (err) {
    const none: undefined = timeLeft
    log(err.message, none)
  } else {
    const wait: number = timeLeft
    log(wait, actionsLeft)
  }
}
limiter('user', precise)
limiter(precise)

// @ts-expect-error `timeLeft` is a number, not a string
limiter('user', (err: Error | null, timeLeft: string) => log(err, timeLeft))
// @ts-expect-error a callback takes at most three parameters
limiter('user', (err: Error | null, timeLeft: number, actionsLeft: number, more: number) => log(err, timeLeft, actionsLeft, more))
