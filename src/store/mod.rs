//! Where limiter state lives: in this process ([`memory`]) or in Redis ([`redis`]).
//!
//! Stores know nothing of the algorithms: the memory store keeps one state value per id, the
//! Redis store runs a Lua script on one key. The algorithms' modules say what the state is.

pub mod memory;
pub mod redis;
