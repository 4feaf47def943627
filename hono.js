'use strict'

module.exports = require('./lib/hono.js')
