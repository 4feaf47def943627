//! Where limiter state lives: in this process ([`memory`]) or in Redis ([`redis`], configured by
//! [`redis_config`], over one [`link`] per node, a Cluster followed by [`cluster`], a primary
//! found and followed through Redis Sentinel by [`sentinel`], its script
//! calls ([`script`]) batched by [`batch`] or, for a lone caller, sent by the JS thread itself through
//! [`direct`], Cluster slots checked by [`slot`]).
//!
//! Stores know nothing of the algorithms: the memory store keeps one state value per id, the
//! Redis store runs Lua scripts. The algorithms' modules say what the state is.

pub mod batch;
pub mod cluster;
pub mod direct;
pub mod link;
pub mod memory;
pub mod redis;
pub mod redis_config;
pub mod script;
pub mod sentinel;
pub mod slot;
