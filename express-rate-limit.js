'use strict'

module.exports = require('./lib/express-rate-limit.js')
