'use strict'

// A NestJS app that keeps @nestjs/throttler (its module, guard and decorators) and counts on
// ratekeeper's storage: per client IP, 3 requests a second and 20 a minute on every route
// (two named throttlers), 5 login attempts a minute on `/login` (`@Throttle` overrides `long`,
// `@SkipThrottle` drops `short`), and `/health` not limited at all. Past a limit: 429 Too Many Requests with
// `Retry-After`, for the throttler's `blockDuration` (here its ttl, the guard's default).
//
// In memory by default; set REDIS_URL to keep the counts on Redis (shared by every instance).
//
//   node examples/nestjs.js                                   # http://127.0.0.1:3000
//   PORT=0 node examples/nestjs.js                            # any free port
//   REDIS_URL=redis://127.0.0.1:6379 node examples/nestjs.js
//
//   curl -i -X POST http://127.0.0.1:3000/login               # again and again
//
// Plain JavaScript, so the decorators are applied as TypeScript's compiler applies them
// (`Reflect.decorate`); in TypeScript, write `@Get()`, `@Throttle(...)` above the methods.

require('reflect-metadata')
const { Controller, Get, Post, Module } = require('@nestjs/common')
const { NestFactory, APP_GUARD } = require('@nestjs/core')
const { ThrottlerModule, ThrottlerGuard, Throttle, SkipThrottle } = require('@nestjs/throttler')
const { RatekeeperThrottlerStorage } = require('ratekeeper/nestjs')

class AppController {
  hello() {
    return { hello: 'world' }
  }

  login() {
    return { loggedIn: false }
  }

  health() {
    return { ok: true }
  }
}

/** Applies method decorators, as `@Decorator() method() {}` does in TypeScript. */
function decorate(Class, method, ...decorators) {
  Reflect.decorate(decorators, Class.prototype, method, Object.getOwnPropertyDescriptor(Class.prototype, method))
}

decorate(AppController, 'hello', Get())
decorate(AppController, 'login', Post('login'), SkipThrottle({ short: true }), Throttle({ long: { limit: 5, ttl: 60_000 } }))
decorate(AppController, 'health', Get('health'), SkipThrottle({ short: true, long: true }))
Controller()(AppController)

class AppModule {}
Module({
  imports: [
    ThrottlerModule.forRoot({
      throttlers: [
        { name: 'short', ttl: 1000, limit: 3 },
        { name: 'long', ttl: 60_000, limit: 20 },
      ],
      // In memory without REDIS_URL; with it, on Redis (or pass your ioredis client, Cluster too).
      storage: new RatekeeperThrottlerStorage({ client: process.env.REDIS_URL || undefined }),
    }),
  ],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
})(AppModule)

async function main() {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] })
  app.enableShutdownHooks()
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1')
  const url = await app.getUrl()
  console.log(`listening on ${url} (counts ${process.env.REDIS_URL ? 'on Redis' : 'in memory'})`)
  console.log(`try: for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' -X POST ${url}/login; done; echo`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
