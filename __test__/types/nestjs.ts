// ratekeeper/nestjs against @nestjs/throttler's own declarations: the storage is a
// `ThrottlerStorage`, its records `ThrottlerStorageRecord`s, and ThrottlerModule takes it as
// `storage`, in forRoot and forRootAsync. Class decorators only: without
// `experimentalDecorators` (types.test.js compiles these files with fixed flags), TypeScript
// types decorators as the standard ones, which Nest's method decorators are not.

import { Controller, Module } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { SkipThrottle, Throttle, ThrottlerGuard, ThrottlerModule, ThrottlerStorage } from '@nestjs/throttler'
import { RedisStore } from '../../index'
import { RatekeeperThrottlerStorage, RatekeeperThrottlerStorageOptions } from '../../nestjs'

// The guide's module (docs/nestjs.md):
@Module({
  imports: [
    ThrottlerModule.forRoot({
      throttlers: [
        { name: 'short', ttl: 1000, limit: 3 },
        { name: 'long', ttl: 60_000, limit: 100, blockDuration: 300_000 },
      ],
      storage: new RatekeeperThrottlerStorage({ client: 'redis://127.0.0.1:6379', onStoreError: 'memory' }),
    }),
  ],
  providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
})
export class AppModule {}

// A controller's own limits, and one left unlimited, from the guide:
@Controller('reports')
@Throttle({ long: { limit: 10, ttl: 60_000 } })
export class ReportsController {}

@Controller('health')
@SkipThrottle({ short: true, long: true })
export class HealthController {}

// forRootAsync, the storage built from configuration:
export const AsyncThrottlerModule = ThrottlerModule.forRootAsync({
  useFactory: () => ({
    throttlers: [{ ttl: 60_000, limit: 100 }],
    storage: new RatekeeperThrottlerStorage({ client: process.env.REDIS_URL, prefix: 'api:', clock: 'local' }),
  }),
})

/** @nestjs/throttler's ThrottlerStorageRecord (its index does not export the type). */
type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>

// The storage is @nestjs/throttler's ThrottlerStorage, its records are ThrottlerStorageRecords,
// and an official record is one of ours.
export async function records(): Promise<ThrottlerStorageRecord> {
  const storage: ThrottlerStorage = new RatekeeperThrottlerStorage()
  const ours = new RatekeeperThrottlerStorage({ client: new RedisStore('redis://127.0.0.1:6379'), onStoreError: 'allow' })
  const record = await ours.increment('user:42', 60_000, 10, 60_000, 'default')
  const seconds: number = record.timeToBlockExpire + record.timeToExpire + record.totalHits
  const blocked: boolean = record.isBlocked
  const prefix: string = ours.prefix
  ours.store?.on('error', (error) => console.warn(error.message, seconds, blocked, prefix))
  const official: ThrottlerStorageRecord = await storage.increment('user:42', 60_000, 10, 0, 'default')
  const same: Awaited<ReturnType<RatekeeperThrottlerStorage['increment']>> = official
  const options: RatekeeperThrottlerStorageOptions = { clock: 'redis' }
  new RatekeeperThrottlerStorage(options)
  return same
}

export async function misuse(storage: RatekeeperThrottlerStorage): Promise<void> {
  // @ts-expect-error: an unknown option
  new RatekeeperThrottlerStorage({ url: 'redis://127.0.0.1:6379' })
  // @ts-expect-error: the clocks are 'redis' and 'local'
  new RatekeeperThrottlerStorage({ clock: 'server' })
  // @ts-expect-error: no such policy
  new RatekeeperThrottlerStorage({ client: 'redis://127.0.0.1:6379', onStoreError: 'fail' })
  // @ts-expect-error: the limits are the throttlers', not the storage's
  new RatekeeperThrottlerStorage({ ttl: 60_000, limit: 10 })
  // @ts-expect-error: durations are numbers of milliseconds
  await storage.increment('user:42', '1m', 10, 0, 'default')
  // @ts-expect-error: the throttler's name is required
  await storage.increment('user:42', 60_000, 10, 0)
  // @ts-expect-error: the prefix is read-only
  storage.prefix = 'other:'
  // @ts-expect-error: a record's count is a number
  const hits: string = (await storage.increment('user:42', 60_000, 10, 0, 'default')).totalHits
  void hits
}
