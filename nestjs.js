'use strict'

module.exports = require('./lib/nestjs.js')
