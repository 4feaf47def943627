// ratekeeper/fastify in a Fastify 5 app typed with fastify's and @fastify/rate-limit's own types:
// the class ratekeeperStore() returns is the plugin's `store` (its FastifyRateLimitStoreCtor),
// in the global options and a route's. Compiled by types.test.js under `module: commonjs` and
// `module: nodenext`.
import { fastify } from 'fastify'
import rateLimit = require('@fastify/rate-limit')
import { ratekeeperStore, RatekeeperFastifyStore, RatekeeperStoreOptions, RateLimitCount } from '../../fastify'
import { RedisStore } from '../..'

const options: RatekeeperStoreOptions = { client: process.env.REDIS_URL || undefined, nameSpace: 'app-' }
const Store = ratekeeperStore(options)

// The plugin's own store types accept it as it is.
const asPluginCtor: rateLimit.FastifyRateLimitStoreCtor = Store
const asPluginStore: rateLimit.FastifyRateLimitStore = new Store({})

export async function buildTypedApp() {
  const app = fastify()
  await app.register(rateLimit, {
    max: 100,
    timeWindow: '1 minute',
    skipOnError: true,
    store: ratekeeperStore({ client: new RedisStore('redis://127.0.0.1:6379') }),
  })
  app.get('/login', { config: { rateLimit: { max: 5, timeWindow: 60_000, ban: 2, store: Store } } }, async () => 'ok')
  const peek = app.createRateLimit({ store: ratekeeperStore() })
  app.get('/peek', async (req) => {
    const state = await peek(req, { increment: false })
    return state.isAllowed ? 'allowed' : state.remaining
  })
  return app
}

export function count(store: RatekeeperFastifyStore, key: string): Promise<RateLimitCount> {
  return new Promise((resolve, reject) => {
    store.incr(key, (error, result) => (error || !result ? reject(error) : resolve(result)), 60_000, 10)
  })
}

const routeStore: RatekeeperFastifyStore = new Store({ continueExceeding: true }).child({ routeInfo: { method: 'GET', url: '/' } })
console.log(asPluginCtor, asPluginStore, routeStore.prefix)

// @ts-expect-error a client is a URL, an options object, a RedisStore or a client, not a number
ratekeeperStore({ client: 6379 })
// @ts-expect-error the option is `nameSpace`, as the plugin's
ratekeeperStore({ prefix: 'app-' })
// @ts-expect-error the plugin's `max` is not an option of the store: it comes with each call
ratekeeperStore({ max: 10 })
// @ts-expect-error the prefix is read-only
routeStore.prefix = 'other-'
// @ts-expect-error incr calls back, it returns nothing to await
count(routeStore, 'k').then(() => routeStore.incr('k', () => {}, 1000, 1).current)
// @ts-expect-error the store is a class for the plugin to construct, not an instance
app2().register(rateLimit, { store: new Store() })

function app2() {
  return fastify()
}
