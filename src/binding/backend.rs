//! Where a limiter keeps its state: this process's memory, or a Redis store under a namespace.

use std::cell::RefCell;
use std::sync::Arc;

use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::time::{system_now, Micros};

/// The largest `maxKeys`.
const MAX_KEYS: f64 = 1e9;

/// The key the in-memory store uses for the global (id-less) limit; no real id is empty.
const GLOBAL_ID: &str = "";

/// Which clock a Redis-backed limiter reads when a call gives no `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The Redis server's, read inside the script: no skew between application hosts.
    Redis,
    /// This host's.
    Local,
}

/// A limiter's place in Redis.
pub struct RedisTarget {
    pub store: Arc<RedisStore>,
    pub namespace: String,
    pub clock: Clock,
    /// Whether keys carry a hash tag of their id (`hashIds`).
    pub hash_ids: bool,
}

impl RedisTarget {
    /// `namespace + id`, as rolling-rate-limiter builds it; the namespace alone for the global
    /// limit. With `hashIds`, `namespace + '{' + hash of id + '}' + id`: the tag, a hash of the
    /// whole id, decides the Cluster slot, so an id holding `{...}` cannot choose its slot (the
    /// id itself stays in the key, so two ids never share a key).
    pub fn key(&self, id: Option<&str>) -> Outcome<String> {
        match id {
            Some(id) if self.hash_ids => {
                Ok(format!("{}{{{:016x}}}{id}", self.namespace, fnv1a(id)))
            }
            Some(id) => Ok(format!("{}{id}", self.namespace)),
            None if self.namespace.is_empty() => Err(Failure::type_error(
                ErrorCode::InvalidId,
                "an id is required when `namespace` is empty",
            )),
            None => Ok(self.namespace.clone()),
        }
    }

    /// The `now` argument of a script: the given instant, this host's clock, or `""` to have the
    /// script read the Redis server's clock.
    pub fn now_argument(&self, now: Option<Micros>) -> String {
        now_text(self.sent_now(now))
    }

    /// The now a call sends to the script: its own, this host's clock with `clock: 'local'`, or
    /// none (the script reads the server's).
    pub fn sent_now(&self, now: Option<Micros>) -> Option<Micros> {
        match (now, self.clock) {
            (Some(now), _) => Some(now),
            (None, Clock::Local) => Some(system_now()),
            (None, Clock::Redis) => None,
        }
    }
}

/// A script's `now` argument for the instant a call sends ([`RedisTarget::sent_now`]): `""` for
/// none.
pub fn now_text(now: Option<Micros>) -> String {
    now.map_or_else(String::new, |now| now.to_string())
}

/// FNV-1a, 64 bits: a stable hash (the same on every host and version), to spread ids over
/// Cluster slots. Not a secret: a client that finds ids sharing a hash only shares a slot.
fn fnv1a(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The store options every engine takes besides its own (and its `namespace`, documented with
/// the key layout it names); the engines' constructors take `XOptions & EngineStoreOptions`.
/// [`Backend::from_options`] reads them.
#[napi_derive::napi(object)]
pub struct EngineStoreOptions {
    /// On Redis, whose clock decides when no `now` is given: `'redis'` (the server's, the
    /// default: no skew between application hosts) or `'local'` (this host's).
    pub clock: Option<String>,
    /// On Redis: put a hash tag of each id in its key (`namespace + '{' + hash + '}' + id`), so
    /// that ids holding `{...}` spread over a Cluster's slots. Default `false`.
    pub hash_ids: Option<bool>,
    /// In memory: the most ids kept; past it, the least recently used are evicted (and start
    /// afresh). Default: unbounded (idle ids are still dropped).
    pub max_keys: Option<f64>,
}

/// The state of every id of one limiter.
pub enum Backend<S> {
    Memory(RefCell<MemoryStore<S>>),
    Redis(RedisTarget),
}

impl<S> Backend<S> {
    /// Reads the store-related options (`namespace`, default `default_namespace`; `clock`;
    /// `hashIds`; `maxKeys`) and picks the backend: Redis when a store is given, memory
    /// otherwise.
    pub fn from_options(
        r: &mut OptionsReader,
        store: Option<&JsRedisStore>,
        default_namespace: &str,
    ) -> Outcome<Self> {
        let namespace = r.string("namespace")?;
        let clock = r.choice("clock", &["redis", "local"])?;
        let hash_ids = r.boolean("hashIds")?.unwrap_or(false);
        let max_keys = match r.number("maxKeys")? {
            None => None,
            Some(n) if n.fract() == 0.0 && (1.0..=MAX_KEYS).contains(&n) => Some(n as usize),
            Some(n) => {
                return Err(Failure::range_error(
                    ErrorCode::InvalidOption,
                    format!("`maxKeys` must be a whole number from 1 to {MAX_KEYS}, got {n}"),
                ))
            }
        };
        if let Some(namespace) = &namespace {
            if namespace.len() > 1024 {
                return Err(Failure::range_error(
                    ErrorCode::InvalidOption,
                    "`namespace` must be at most 1024 bytes",
                ));
            }
        }
        match store {
            Some(_) if max_keys.is_some() => Err(Failure::range_error(
                ErrorCode::InvalidOption,
                "`maxKeys` bounds the in-memory store; on Redis, keys expire by themselves",
            )),
            Some(store) => Ok(Backend::Redis(RedisTarget {
                store: store.inner.clone(),
                namespace: namespace.unwrap_or_else(|| default_namespace.to_owned()),
                clock: if clock == Some("local") { Clock::Local } else { Clock::Redis },
                hash_ids,
            })),
            None if clock == Some("redis") => Err(Failure::range_error(
                ErrorCode::InvalidOption,
                "`clock: 'redis'` needs a Redis store (`client`); the in-memory store uses this host's clock",
            )),
            None => Ok(Backend::Memory(RefCell::new(MemoryStore::new(max_keys)))),
        }
    }

    /// How many ids the in-memory store holds state for (0 on Redis).
    pub fn memory_size(&self) -> usize {
        match self {
            Backend::Memory(store) => store.borrow().len(),
            Backend::Redis(_) => 0,
        }
    }

    /// How many active ids the in-memory store evicted to stay within `maxKeys` (0 on Redis).
    /// The in-memory store's sweep when no call comes (see [`MemoryStore::sweep_if_quiet`]);
    /// nothing on Redis, or while the store is in use.
    pub fn sweep_if_quiet(&self, period: Micros, is_idle: impl Fn(&S, Micros) -> bool) {
        if let Backend::Memory(store) = self {
            if let Ok(mut store) = store.try_borrow_mut() {
                store.sweep_if_quiet(period, is_idle);
            }
        }
    }

    pub fn memory_evictions(&self) -> u64 {
        match self {
            Backend::Memory(store) => store.borrow().evicted(),
            Backend::Redis(_) => 0,
        }
    }
}

/// The in-memory key of an id.
pub fn memory_id(id: Option<&str>) -> &str {
    id.unwrap_or(GLOBAL_ID)
}

/// This host's clock unless the call gave `now`.
pub fn local_now(now: Option<Micros>) -> Micros {
    now.unwrap_or_else(system_now)
}
