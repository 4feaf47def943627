'use strict'

// rate-limiter-flexible's login protection, moved to ratekeeper by changing one require: an IP
// may try 10 logins a minute, and a username is blocked for 15 minutes after 3 failed logins in
// a row; both are asked at once, in one atomic RateLimiterUnion (a refusal charges neither).
//
//   node examples/flexible.js                          # in memory
//   REDIS_URL=redis://127.0.0.1:6379 node examples/flexible.js
//
// It plays 8 login attempts of one IP against one account (the 4th with the right password)
// and prints each answer.

const { RateLimiterMemory, RateLimiterRedis, RateLimiterUnion, RateLimiterRes } = require('ratekeeper/flexible')

const redisUrl = process.env.REDIS_URL

/** A limiter on Redis when REDIS_URL is set, else in memory; the same options either way. */
function limiter(options) {
  return redisUrl ? new RateLimiterRedis({ storeClient: redisUrl, ...options }) : new RateLimiterMemory(options)
}

const perIp = limiter({ keyPrefix: 'login_ip', points: 10, duration: 60 })
const failures = limiter({ keyPrefix: 'login_fail', points: 3, duration: 900, blockDuration: 900 })
const login = new RateLimiterUnion(perIp, failures)

/** One attempt: `allowed`, or `refused` with the seconds to wait. */
async function attempt(ip, username, passwordIsRight) {
  // One hash tag for both keys: on a Redis Cluster, a union's keys must share a slot.
  const key = `{${username}}${ip}`
  try {
    await login.consume(key)
  } catch (refused) {
    if (refused instanceof Error) throw refused
    const waitMs = Math.max(...Object.values(refused).map((res) => res.msBeforeNext))
    return `refused by ${Object.keys(refused).join(' and ')}: retry in ${Math.ceil(waitMs / 1000)} s`
  }
  if (passwordIsRight) {
    // A success forgets the failures.
    await failures.delete(key)
    return 'allowed: logged in'
  }
  return 'allowed: wrong password'
}

async function main() {
  const passwords = [false, false, true, false, false, false, false, false]
  for (const [i, right] of passwords.entries()) {
    console.log(`attempt ${i + 1}: ${await attempt('10.0.0.1', 'ada', right)}`)
  }
  const res = await perIp.get('{ada}10.0.0.1')
  console.log(`the IP has ${res instanceof RateLimiterRes ? res.remainingPoints : 0} attempts left this minute`)
  process.exit(0)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
