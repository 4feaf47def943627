'use strict'

module.exports = require('./lib/fastify.js')
