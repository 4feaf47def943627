'use strict'

// Where a test's random run of calls starts: at a present-day instant, or at or just after the
// epoch, where test frameworks' fake clocks start (sinon, Node's `mock.timers`, jest's timers) and
// every window still reaches back before 0. Both stores must answer alike from either.

const fc = require('fast-check')

/** Instants (ms) at and just after the epoch. */
const NEAR_EPOCH = [0, 1, 999, 2500]

/** A run's first instant (ms): `presentDay`, or one of NEAR_EPOCH. */
const startArb = (presentDay) => fc.constantFrom(presentDay, ...NEAR_EPOCH)

module.exports = { NEAR_EPOCH, startArb }
