'use strict'

/**
 * The direct lanes (src/store/direct.rs): a lone Redis call (nothing else of this process's
 * calls pending, the only call held once the microtasks before it ran, or at the end of its turn
 * of the event loop: lib/engine.js, sendSoon) is written by this thread on a
 * socket of its own to the node (a single node, or the primary found through Sentinel), and its
 * reply read here, instead of going through the store's thread and back: one
 * wake-up of this thread per call, as with a JavaScript client, where the usual way costs a lone
 * caller two hand-offs between threads (benchmark/RESULTS.md, item 28).
 *
 * A lane is one socket per store and node, opened after the first lone call that wanted it (that
 * call, and those made while it opens, go the usual way), logged in as the store's own
 * connection is (AUTH, SELECT), and closed when Redis closes it, when a call on it times out or
 * when its store is closed. It never keeps the process alive: a call waiting on it does, through
 * the answer channel, as every call does.
 */

const net = require('node:net')
const binding = require('./native.js')

/** After a lane failed to open or closed with an error, how long before opening it again. */
const REOPEN_AFTER_MS = 1000

/** The size of the buffer a lone call's request is written into (a longer one gets its own). */
const SCRATCH_BYTES = 16 * 1024

/** The size of the buffer a lane reads its replies into (a longer reply takes several reads). */
const READ_BYTES = 16 * 1024

/** The lanes of every `directLanes`. */
const everyLanes = new Set()

/**
 * The lanes of `lib/engine.js`: `send(ticket)` once the native side offered a lone call.
 * `settle(ticket, error)` settles a call that went by a lane: `error`
 * undefined when answered (`out` holds its answer, and those of the calls answered with it); it is not called for a call passed on to the
 * usual way (the answer channel answers it). `afterCall()` runs once a lane's call is over when
 * calls made meanwhile were held for it, or it failed or was passed on.
 */
function directLanes({ out, settle, afterCall }) {
  /** Lanes by number (the native side numbers them), open, opening or waiting to reopen. */
  const lanes = new Map()
  everyLanes.add(lanes)
  /** Where `takeDirectCall` writes a call's lane number and timeout. */
  const taken = new Float64Array(2)
  /**
   * Where `takeDirectCall` writes a call's request, reused from call to call: a lane carries one
   * call at a time, and its reply comes only once Redis has read the whole request, so the bytes
   * are never overwritten while a socket may still be writing them.
   */
  const scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES)

  class Lane {
    constructor(address) {
      this.number = address.lane
      this.store = address.store
      this.ready = false
      this.closed = false
      /** The ticket of the call on the lane, or -1. */
      this.ticket = -1
      this.timeoutMs = 0
      this.handshake = { replies: address.replies, bytes: Buffer.alloc(0) }
      // Replies are read into one buffer of the lane's, reused read after read (`onread`): no
      // Buffer per read, and no stream machinery between the socket and `received`.
      const onread = { buffer: Buffer.allocUnsafeSlow(READ_BYTES), callback: (length, buffer) => this.received(buffer.subarray(0, length)) }
      const socket = address.path !== null && address.path !== undefined ? net.connect({ path: address.path, onread }) : net.connect({ port: address.port, host: address.host, onread })
      this.socket = socket
      socket.unref()
      socket.setNoDelay(true)
      socket.setTimeout(address.connectTimeoutMs)
      socket.on('connect', () => {
        if (address.replies > 0) socket.write(address.handshake)
        else this.open()
      })
      socket.on('timeout', () => {
        if (!this.ready) this.close('the connection took too long to open')
        else if (this.ticket !== -1) this.fail(undefined)
      })
      socket.on('error', (error) => this.close(error.message))
      socket.on('close', () => this.close('the connection was closed'))
    }

    open() {
      this.ready = true
      this.socket.setTimeout(0)
      binding.setDirectLaneReady(this.number, true)
    }

    send(request, ticket, timeoutMs) {
      this.ticket = ticket
      if (timeoutMs !== this.timeoutMs) {
        this.timeoutMs = timeoutMs
        this.socket.setTimeout(timeoutMs)
      }
      this.socket.write(request)
    }

    received(bytes) {
      if (!this.ready) return this.handshaken(bytes)
      const ticket = this.ticket
      let read
      try {
        read = binding.readDirectReply(bytes, out)
      } catch (error) {
        this.ticket = -1
        settle(ticket, error)
        afterCall()
        return
      }
      // (Bit 4: calls made meanwhile wait to be sent; else, answered, there is nothing to send.)
      const released = (read & 4) !== 0
      read &= 3
      if (read === 0) {
        if (released) afterCall()
        return
      }
      if (read === 3) return this.close('Redis sent what is not the reply of a call')
      this.ticket = -1
      if (read === 1) settle(ticket, undefined)
      if (released || read === 2) afterCall()
    }

    handshaken(bytes) {
      const handshake = this.handshake
      handshake.bytes = Buffer.concat([handshake.bytes, bytes])
      try {
        const length = binding.readDirectHandshake(handshake.bytes, handshake.replies)
        if (length === handshake.bytes.length) this.open()
        else if (length !== -1) this.close('Redis sent more than the login replies')
      } catch (error) {
        this.close(error.message)
      }
    }

    /** Fails the call on the lane: its connection was lost (`reason`) or, without one, it timed out. */
    fail(reason) {
      const ticket = this.ticket
      this.ticket = -1
      try {
        binding.failDirectCall(reason)
      } catch (error) {
        settle(ticket, error)
      }
      if (reason === undefined) this.close('a call timed out')
      afterCall()
    }

    close(reason) {
      if (this.closed) return
      this.closed = true
      if (this.ready) binding.setDirectLaneReady(this.number, false)
      this.ready = false
      if (this.ticket !== -1) this.fail(reason)
      this.socket.destroy()
      // Opened again by a lone call after a while (not at once, when Redis is going away).
      const timer = setTimeout(() => {
        if (lanes.get(this.number) === this) lanes.delete(this.number)
      }, REOPEN_AFTER_MS)
      timer.unref()
    }
  }

  /** After a lone call: sends it by its lane, or opens the lane it wanted. */
  function send(ticket) {
    let request = binding.takeDirectCall(taken, scratch)
    if (request === null) return
    if (typeof request === 'number') request = scratch.subarray(0, request)
    else if (!Buffer.isBuffer(request)) {
      if (!lanes.has(request.lane)) lanes.set(request.lane, new Lane(request))
      return
    }
    const lane = lanes.get(taken[0])
    if (lane !== undefined && lane.ready) {
      lane.send(request, ticket, taken[1])
      return
    }
    // (Never: the native side offers only lanes said to be ready.)
    binding.setDirectLaneReady(taken[0], false)
    try {
      binding.failDirectCall('the lane was not open')
    } catch (error) {
      settle(ticket, error)
    }
  }

  return { send }
}

/** Closes the lanes of `store` (a RedisStore being closed). */
function closeLanesOf(store) {
  const id = binding.directLaneStore(store)
  for (const lanes of everyLanes) {
    for (const lane of lanes.values()) {
      if (lane.store === id) lane.close('the store was closed')
    }
  }
}

module.exports = { directLanes, closeLanesOf }
