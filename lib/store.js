'use strict'

/**
 * Turns the `client` (or `redis`) option into a native `RedisStore`.
 *
 * Accepted forms: a `RedisStore`; a Redis URL; an options object (`url`, `host`, `port`, ...);
 * or an ioredis / node-redis client (single node or cluster), whose connection settings are read
 * so that the native side opens its own connection to the same server. Limiters built from the
 * same URL or the same client object share one store, hence one multiplexed connection.
 */

const { RedisStore } = require('./native.js')
const { detectClientType, connectionOptionsFromClient } = require('./redis-client.js')
const { typeError, rangeError, shown } = require('./errors.js')

const { closeLanesOf } = require('./direct.js')

const STORE_EVENTS = ['error', 'reconnect']
/** store -> { error: Set, reconnect: Set } of the listeners added with `on`. */
const listenersByStore = new WeakMap()

/**
 * `store.on('error', (error) => ...)`: once per outage of a node (its connection lost or not
 * opened), an Error with `code: 'ERR_STORE_UNAVAILABLE'` and `node` (`host:port`);
 * `store.on('reconnect', ({ node }) => ...)`: once when that node is back. Calls that fail
 * meanwhile still reject one by one; these events let an app log an outage once.
 */
RedisStore.prototype.on = function on(event, listener) {
  if (!STORE_EVENTS.includes(event)) {
    throw rangeError('ERR_INVALID_ARGUMENT', `a RedisStore emits 'error' and 'reconnect', not ${shown(event)}`)
  }
  if (typeof listener !== 'function') throw typeError('ERR_INVALID_ARGUMENT', 'the listener must be a function')
  let listeners = listenersByStore.get(this)
  if (!listeners) {
    const byEvent = { error: new Set(), reconnect: new Set() }
    listeners = byEvent
    listenersByStore.set(this, byEvent)
    this.setEventListener((type, node, message) => {
      const payload =
        type === 'error'
          ? Object.assign(new Error(`Redis at ${node} is unavailable: ${message}`), { code: 'ERR_STORE_UNAVAILABLE', node })
          : { node }
      for (const each of byEvent[type]) each(payload)
    })
  }
  listeners[event].add(listener)
  return this
}

/** Removes a listener added with `on`. */
RedisStore.prototype.off = function off(event, listener) {
  const listeners = listenersByStore.get(this)
  if (listeners && STORE_EVENTS.includes(event)) listeners[event].delete(listener)
  return this
}

const closeNative = RedisStore.prototype.close
/** Closes the store's connections, its direct lanes (lib/direct.js) included. */
RedisStore.prototype.close = function close() {
  closeLanesOf(this)
  return closeNative.call(this)
}

const storesByUrl = new Map()
const storesByClient = new WeakMap()

function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * The store for a `client` option, and the detected client type (`'ioredis'`, `'node-redis'`,
 * ... or `null` for our own forms).
 *
 * @param {unknown} client
 * @param {string} optionName the option's name, for error messages
 * @returns {{ store: RedisStore, clientType: string | null }}
 */
function resolveStore(client, optionName = 'client') {
  if (client instanceof RedisStore) return { store: client, clientType: null }
  if (typeof client === 'string') {
    let store = storesByUrl.get(client)
    if (!store) {
      store = new RedisStore(client)
      storesByUrl.set(client, store)
    }
    return { store, clientType: null }
  }
  const clientType = client != null && typeof client === 'object' ? detectClientType(client) : null
  if (clientType) {
    let store = storesByClient.get(client)
    if (!store) {
      store = new RedisStore(connectionOptionsFromClient(client))
      storesByClient.set(client, store)
    }
    return { store, clientType }
  }
  if (isPlainObject(client)) return { store: new RedisStore(client), clientType: null }
  throw typeError(
    'ERR_INVALID_OPTION',
    `\`${optionName}\` must be a RedisStore, a Redis URL, an options object, or an ioredis or node-redis client`,
  )
}

module.exports = { resolveStore }
