'use strict'

module.exports = require('./lib/flexible/index.js')
