'use strict'

module.exports = require('./lib/koa.js')
