// Gcra side by side with the real redis-cell module (CL.THROTTLE, redis-cell 0.2.2 from
// crates.io, built here into a temp dir), on the same Redis, on the same seeded sequences.
// redis-cell reads the system clock: a small preloaded library (CLOCK below, compiled here) stops
// the Redis server's wall clock at each call's instant, read from a file the test writes before
// the call, so that CL.THROTTLE and Gcra see the same `now`. (libfaketime does not start
// jemalloc's redis-server: "Unexpected recursive calls to clock_gettime()".)
//
// It fetches and builds the crate (5 to 20 s) with cargo from crates.io and a C compiler, which
// building ratekeeper needs already; a failed build fails the test. RATEKEEPER_REDIS_CELL=0 leaves
// it out (say, offline), and it needs Linux (the clock is preloaded the Linux way). On a server
// that will not load the module, or that does not keep to the preloaded clock, the tests skip
// and say why.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const IORedis = require('ioredis')

const { Gcra, RedisStore } = require('..')
const { startUnlessRefused } = require('./helpers/redis-server.js')
const { RedisCell } = require('./helpers/redis-cell.js')
const { random } = require('./helpers/random.js')

// CLOCK_REALTIME, gettimeofday and time read the instant (microseconds, twice, to see a torn
// write) from the file RK_CLOCK_FILE; the other clocks are the kernel's. No malloc, no dlsym:
// jemalloc reads clocks while it starts.
const CLOCK = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *fake;

static int64_t fake_us(void) {
  if (!fake) {
    const char *file = getenv("RK_CLOCK_FILE");
    int fd = file ? open(file, O_RDONLY) : -1;
    if (fd < 0) return -1;
    void *p = mmap(NULL, 16, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return -1;
    fake = p;
  }
  for (;;) {
    int64_t a = fake[0], b = fake[1];
    if (a == b) return a;
  }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  if (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) {
    int64_t us = fake_us();
    if (us >= 0) {
      ts->tv_sec = us / 1000000;
      ts->tv_nsec = (us % 1000000) * 1000;
      return 0;
    }
  }
  return syscall(SYS_clock_gettime, clock, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  (void)tz;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return 0;
}

time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
`

const run = (cwd, command, args) => execFileSync(command, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], timeout: 300_000 })

/** Fetches redis-cell 0.2.2 with `cargo vendor` and builds it in `dir`; returns the module's path. */
function buildRedisCell(dir) {
  const fetcher = path.join(dir, 'fetch')
  fs.mkdirSync(path.join(fetcher, 'src'), { recursive: true })
  fs.writeFileSync(path.join(fetcher, 'src', 'lib.rs'), '')
  fs.writeFileSync(
    path.join(fetcher, 'Cargo.toml'),
    '[package]\nname = "fetch-redis-cell"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nredis-cell = "=0.2.2"\n',
  )
  run(fetcher, 'cargo', ['vendor', '--versioned-dirs', '--quiet', 'vendor'])
  const crate = path.join(fetcher, 'vendor', 'redis-cell-0.2.2')
  run(crate, 'cargo', ['build', '--release', '--quiet', '--target-dir', path.join(dir, 'target')])
  return path.join(dir, 'target', 'release', 'libredis_cell.so')
}

/** Compiles CLOCK in `dir`; returns the library's path. */
function buildClock(dir) {
  fs.writeFileSync(path.join(dir, 'clock.c'), CLOCK)
  run(dir, 'cc', ['-shared', '-fPIC', '-O2', '-o', 'clock.so', 'clock.c'])
  return path.join(dir, 'clock.so')
}

/** Why this file cannot run here, or null. */
let skip = null
let work // the temp dir
let redis
let r // a direct client, for CL.THROTTLE and GET
let store
let clockFile // the Redis server's wall clock

before(async () => {
  if (process.env.RATEKEEPER_REDIS_CELL === '0') {
    skip = 'RATEKEEPER_REDIS_CELL=0: redis-cell is not built'
    return
  }
  if (process.platform !== 'linux') {
    skip = 'the clock is preloaded the Linux way'
    return
  }
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-redis-cell-'))
  let module
  let clock
  try {
    const started = Date.now()
    module = buildRedisCell(work)
    clock = buildClock(work)
    // A server that cannot open the module skips: it must be there.
    for (const built of [module, clock]) if (!fs.existsSync(built)) throw new Error(`no ${built}`)
    console.log(`# redis-cell and the clock built in ${Date.now() - started} ms`)
  } catch (error) {
    throw new Error(`redis-cell or the clock did not build: ${String(error.stderr || error.message).slice(0, 2000)}`)
  }
  clockFile = path.join(work, 'clock')
  setClock(1_700_000_000_000_000n)
  // The server alone runs on that clock: the environment is set only while it starts.
  Object.assign(process.env, { LD_PRELOAD: clock, RK_CLOCK_FILE: clockFile })
  let started
  try {
    started = await startUnlessRefused({ args: ['--loadmodule', module] })
  } finally {
    delete process.env.LD_PRELOAD
    delete process.env.RK_CLOCK_FILE
  }
  if (started.refused !== undefined) {
    skip = `this redis-server does not load redis-cell: ${started.refused}`
    return
  }
  redis = started.server
  r = new IORedis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0 })
  await r.connect()
  // Keys expire on the server's clock: it must read the stopped clock to the microsecond, as
  // CL.THROTTLE does. (Valkey 9 advances its own time between reads of the system clock.)
  for (const stopped of [1_700_000_000_123_457n, 1_700_000_061_000_001n]) {
    setClock(stopped)
    const [seconds, micros] = await r.call('TIME')
    const drift = BigInt(seconds) * 1_000_000n + BigInt(micros) - stopped
    if (drift !== 0n) {
      skip = `this redis-server does not keep to the preloaded clock (TIME answered ${drift} µs past it): its keys would not expire on redis-cell's clock`
      return
    }
  }
  store = await RedisStore.connect(redis.url)
})

after(async () => {
  if (r) r.disconnect()
  if (store) await store.close()
  if (redis) await redis.stop()
  if (work) fs.rmSync(work, { recursive: true, force: true })
})

/** Stops the server's wall clock at `us` microseconds since the epoch (one 16-byte write). */
function setClock(us) {
  const bytes = Buffer.alloc(16)
  bytes.writeBigInt64LE(us, 0)
  bytes.writeBigInt64LE(us, 8)
  const fd = fs.openSync(clockFile, fs.existsSync(clockFile) ? 'r+' : 'w')
  try {
    fs.writeSync(fd, bytes, 0, 16, 0)
  } finally {
    fs.closeSync(fd)
  }
}

const ceilDiv = (a, b) => (a + b - 1n) / b

/**
 * Runs one seeded sequence on CL.THROTTLE, the model and Gcra; `grid` (µs) is the step of the
 * arrival times. Returns the calls where Gcra and CL.THROTTLE answered differently.
 */
async function compare(t, [periodSeconds, count, maxBurst], grid, calls) {
  if (skip) return t.skip(skip)
  const namespace = `cmp-${count}-${maxBurst}-${grid}:`
  const g = new Gcra({ client: store, namespace, limit: count, period: periodSeconds * 1000, burst: maxBurst + 1 })
  const model = new RedisCell({ expiry: true })
  const T = BigInt((periodSeconds * 1_000_000) / count)
  const tau = T * BigInt(maxBurst + 1)
  const rand = random(count * 31 + maxBurst + grid)
  let now = 1_700_000_000_000_000n
  const differences = []
  for (let call = 0; call < calls; call++) {
    // Mostly gaps below 3 T; on the microsecond grid, every third one within a millisecond of
    // T, where a TAT is reached.
    const near = grid === 1 && rand() < 0.33
    const gap = near ? Math.max(0, Number(T) - 1000 + Math.floor(rand() * 2000)) : Math.floor((rand() * rand() * 3 * Number(T)) / grid) * grid
    now += rand() < 0.1 ? 0n : BigInt(gap)
    const r0 = rand()
    const quantity = r0 < 0.15 ? 0 : r0 < 0.7 ? 1 : r0 < 0.95 ? 1 + Math.floor(rand() * (maxBurst + 1)) : maxBurst + 2
    setClock(now)
    const real = await r.call('CL.THROTTLE', `cell:${namespace}`, maxBurst, count, periodSeconds, quantity)
    const where = `${count} per ${periodSeconds} s, max_burst ${maxBurst}, call ${call} (quantity ${quantity}) at +${now - 1_700_000_000_000_000n} µs`
    assert.deepEqual(real, model.throttle('k', maxBurst, count, periodSeconds, quantity, now * 1000n), `the model, ${where}`)
    // Gcra's answer as CL.THROTTLE's numbers (a quantity of 0 is a peek).
    const at = { now: Number(now) / 1000, weight: Math.max(quantity, 1) }
    const ours = quantity === 0 ? await g.peek('k', at) : await g.consume('k', at)
    const stored = await r.get(`${namespace}k`)
    const tat = stored === null ? now : BigInt(stored) > now ? BigInt(stored) : now
    const wait = tat + BigInt(quantity) * T - tau - now
    const retry = quantity === 0 || ours.allowed || ours.timeLeft === Infinity ? -1 : Number(wait / 1_000_000n)
    assert.equal(ours.resetAfter, Number(ceilDiv(tat - now, 1000n)), where)
    const translated = [quantity === 0 || ours.allowed ? 0 : 1, ours.limit, ours.remaining, retry, Number((tat - now) / 1_000_000n)]
    if (JSON.stringify(translated) !== JSON.stringify(real)) {
      const detail = `${where}: redis-cell ${JSON.stringify(real)}, Gcra ${JSON.stringify(translated)}`
      if (model.stale && quantity > maxBurst + 1) {
        // redis-cell keeps a stale TAT (its key lives on within its last millisecond) for a
        // weight that never passes: remaining above its limit, a reset of 0 or less.
        assert.ok(real[2] >= real[1] && real[4] <= 0, detail)
        assert.deepEqual(translated, [1, maxBurst + 1, maxBurst + 1, -1, 0], detail)
        differences.push({ kind: 'stale', where })
        continue
      }
      assert.ok(model.expiredEarly, detail)
      differences.push({ kind: 'early', where })
      // Take redis-cell's TAT, to go on comparing from the same state.
      const theirs = await r.get(`cell:${namespace}`)
      if (theirs === null) await r.del(`${namespace}k`)
      else await r.set(`${namespace}k`, String(BigInt(theirs) / 1000n), 'PX', 600_000)
    }
  }
  return differences
}

describe('Gcra and the real redis-cell module', () => {
  // Arrivals on whole milliseconds, emission intervals of whole milliseconds: redis-cell's keys
  // expire exactly at their TAT, and the answers are the same.
  for (const config of [
    [1, 1, 4],
    [1, 8, 0],
    [2, 5, 2],
    [7, 7, 6],
    [60, 30, 15],
    [1, 1000, 99],
  ]) {
    it(`answers as CL.THROTTLE k ${config[2]} ${config[1]} ${config[0]}`, async (t) => {
      const differences = await compare(t, config, 1000, 200)
      if (differences) assert.deepEqual(differences, [])
    })
  }

  it("admits up to a millisecond early, where redis-cell's key expires before its TAT", async (t) => {
    if (skip) return t.skip(skip)
    // 64 per second, bursts of 1: T = 15,625 µs. A call at +0.9 ms leaves the TAT at
    // +16.525 ms, under a TTL of 15 ms (truncated) from millisecond 0: gone from +16 ms on.
    const g = new Gcra({ client: store, namespace: 'early:', limit: 64, period: 1000, burst: 1 })
    const start = 1_700_000_100_000_000n
    setClock(start + 900n)
    assert.deepEqual(await r.call('CL.THROTTLE', 'cell:early', 0, 64, 1), [0, 1, 0, -1, 0])
    assert.equal((await g.consume('k', { now: Number(start + 900n) / 1000 })).allowed, true)
    setClock(start + 16_100n)
    // redis-cell finds no key and admits; Gcra waits the 425 µs left (1 ms, rounded up).
    assert.deepEqual(await r.call('CL.THROTTLE', 'cell:early', 0, 64, 1), [0, 1, 0, -1, 0])
    const ours = await g.consume('k', { now: Number(start + 16_100n) / 1000 })
    assert.deepEqual([ours.allowed, ours.timeLeft], [false, 1])
  })

  // Arrivals on whole microseconds: redis-cell's key TTL is truncated to the millisecond, so a
  // key may expire up to a millisecond before its TAT, and redis-cell then admits early. The
  // model, which has that store, still matches CL.THROTTLE exactly; Gcra differs only there.
  for (const config of [
    [1, 64, 9],
    [1, 400, 99],
    [1, 1_000_000, 999],
  ]) {
    it(`matches the model of CL.THROTTLE k ${config[2]} ${config[1]} ${config[0]} to the microsecond`, async (t) => {
      const differences = await compare(t, config, 1, 300)
      if (!differences) return
      const count = (kind) => differences.filter((d) => d.kind === kind).length
      t.diagnostic(`of 300 calls, ${count('early')} differ where redis-cell's key expired before its TAT, ${count('stale')} where it kept a stale TAT`)
    })
  }
})
