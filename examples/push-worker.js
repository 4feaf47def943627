'use strict'

// A push-notification worker that throttles per user, as in the ClassDojo post: at most 2
// notifications per user every 3 seconds, and at least 1 second between two of them. Deferred
// notifications are retried once the limiter says they may go.
//
//   node examples/push-worker.js                                # in memory
//   REDIS_URL=redis://127.0.0.1:6379 node examples/push-worker.js   # shared by every worker

const RateLimiter = require('..')

const limiter = RateLimiter({
  redis: process.env.REDIS_URL || undefined,
  namespace: 'push:',
  interval: 3000,
  maxInInterval: 2,
  minDifference: 1000,
  // A deferred notification is not an action: do not let it push the next one further out
  // (rolling-rate-limiter records blocked attempts; a worker that retries should not).
  recordBlocked: false,
})

const queue = [
  { user: 'teacher-1', text: 'Parent message' },
  { user: 'teacher-1', text: 'Another parent message' },
  { user: 'teacher-2', text: 'Class starts soon' },
  { user: 'teacher-1', text: 'Yet another message' },
]
const started = Date.now()
const elapsed = () => `${String(Date.now() - started).padStart(5)} ms`

function deliver(notification) {
  limiter(notification.user, (err, timeLeft) => {
    if (err) return console.error(`${elapsed()}  limiter unavailable, dropping: ${err.message}`)
    if (timeLeft > 0) {
      console.log(`${elapsed()}  defer  ${notification.user}: "${notification.text}" (retry in ${timeLeft} ms)`)
      setTimeout(() => deliver(notification), timeLeft)
      return
    }
    console.log(`${elapsed()}  send   ${notification.user}: "${notification.text}"`)
  })
}

queue.forEach(deliver)
