'use strict'

// A real NestJS app behind @nestjs/throttler's guard, for __test__/nestjs.test.js: built in plain
// JavaScript, with the decorators applied as TypeScript's compiler applies them
// (`Reflect.decorate`), served on a free port by the Express or the Fastify platform.

require('reflect-metadata')
const { Controller, Get, Module } = require('@nestjs/common')
const { NestFactory, APP_GUARD } = require('@nestjs/core')
const { FastifyAdapter } = require('@nestjs/platform-fastify')
const { ThrottlerModule, ThrottlerGuard, Throttle, SkipThrottle } = require('@nestjs/throttler')

/** Applies method decorators, as `@Decorator() method() {}` does in TypeScript. */
function decorate(Class, method, ...decorators) {
  Reflect.decorate(decorators, Class.prototype, method, Object.getOwnPropertyDescriptor(Class.prototype, method))
}

/**
 * The app's routes (the guard keys a count by controller, handler, throttler and client IP):
 * - `GET /`: the throttlers as configured;
 * - `GET /login`: `@Throttle` overrides: `default` 1 per 5 s blocked for 20 s, `long` 2 a minute;
 * - `GET /search`: `@SkipThrottle({ short: true })`, so only `long` (and `default`) count;
 * - `GET /health`: every throttler skipped.
 * A fresh class per app (the same name, so that two apps on one Redis share their keys).
 */
function limitsController() {
  class LimitsController {
    hello() {
      return { hello: 'world' }
    }

    login() {
      return { loggedIn: true }
    }

    search() {
      return { results: [] }
    }

    health() {
      return { ok: true }
    }
  }
  decorate(LimitsController, 'hello', Get())
  decorate(LimitsController, 'login', Get('login'), Throttle({ default: { limit: 1, ttl: 5000, blockDuration: 20_000 }, long: { limit: 2, ttl: 60_000 } }))
  decorate(LimitsController, 'search', Get('search'), SkipThrottle({ short: true }))
  decorate(LimitsController, 'health', Get('health'), SkipThrottle({ default: true, short: true, long: true }))
  Controller()(LimitsController)
  return LimitsController
}

/** The app's root module: ThrottlerModule with `throttlers` and `storage` (none: the official one), its guard on every route. */
function appModule(throttlers, storage) {
  class AppModule {}
  const options = storage === undefined ? { throttlers } : { throttlers, storage }
  Module({
    imports: [ThrottlerModule.forRoot(options)],
    controllers: [limitsController()],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })(AppModule)
  return AppModule
}

/**
 * Starts the app on `platform` (`'express'` or `'fastify'`) on a free port, closed when the test
 * `t` ends; resolves its base URL. Nest logs nothing (a failing storage's error included: the
 * response's 500 says it).
 */
async function serveNestApp(t, { platform, throttlers, storage }) {
  const module = appModule(throttlers, storage)
  const app = platform === 'fastify' ? await NestFactory.create(module, new FastifyAdapter(), { logger: false }) : await NestFactory.create(module, { logger: false })
  await app.listen(0, '127.0.0.1')
  t.after(() => app.close())
  return app.getUrl()
}

/** The rate-limit headers a response carries (`x-ratelimit-*`, `retry-after*`), by name. */
function limitHeaders(response) {
  return Object.fromEntries([...response.headers].filter(([name]) => /^(x-ratelimit-|retry-after)/.test(name)).sort())
}

/** GETs `url`; resolves `{ status, headers }`, the headers the rate-limit ones. */
async function request(url) {
  const response = await fetch(url)
  await response.arrayBuffer()
  return { status: response.status, headers: limitHeaders(response) }
}

module.exports = { serveNestApp, request }
