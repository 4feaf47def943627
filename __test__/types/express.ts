// The middleware in an Express app typed with Express's own types (@types/express): `key`,
// `weight`, `skip` and `handler` take Express's `Request`, and the middleware is a handler
// `app.use` accepts. Compiled by types.test.js under `module: commonjs` and `module: nodenext`.
import express = require('express')
import type { Request, Response, NextFunction } from 'express'
import { rateLimit, TokenBucket, FixedWindow, RateLimitAnswer } from '../..'
import { Store } from '../../express-rate-limit'

const app = express()
const limiter = new TokenBucket({ capacity: 10, refillAmount: 1, refillInterval: 1000 })
const perUser = (req: Request): string => req.get('x-user') ?? req.ip ?? 'unknown'

app.use(rateLimit({ limiter, key: perUser, weight: (req: Request) => (req.method === 'POST' ? 2 : 1) }))
app.use('/api', rateLimit({
  limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 100 }] }),
  key: (req: Request) => req.ip ?? '',
  skip: (req: Request) => req.path === '/health',
  handler: (req: Request, res: Response, next: NextFunction, answer: RateLimitAnswer) => {
    res.status(429).json({ timeLeft: answer.timeLeft, key: answer.key })
  },
}))
app.get('/', (req, res) => res.json({ store: new Store().localKeys }))

// @ts-expect-error a key is an id (a string or a number), not an object
rateLimit({ limiter, key: (req: Request) => req.headers })
// @ts-expect-error the middleware needs a limiter
rateLimit({ key: perUser })
