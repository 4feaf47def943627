//! One Redis node's connection: opened on first use, shared by every call (multiplexed), and
//! reopened after it fails. What happened is counted in [`RedisCounters`] for `stats()`.
//!
//! A node whose connection just failed is not dialled again for [`DOWN_FOR`]: calls meanwhile
//! fail at once with the same error instead of each waiting for a connection attempt, so an
//! outage costs no more than one attempt per [`DOWN_FOR`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisError};

/// How long a node whose connection failed is answered for without dialling it again.
pub const DOWN_FOR: Duration = Duration::from_millis(100);

/// One node's connection.
pub struct NodeLink {
    info: ConnectionInfo,
    config: AsyncConnectionConfig,
    node: String,
    /// Read by every call without waiting: calls keep the order they were made in.
    state: RwLock<LinkState>,
    /// Held while the connection is being opened, so that concurrent callers open one.
    opening: tokio::sync::Mutex<()>,
}

#[derive(Default, Clone)]
enum LinkState {
    /// Never opened.
    #[default]
    New,
    Open(MultiplexedConnection),
    /// The last attempt, or the open connection, failed.
    Down {
        since: Instant,
        error: RedisError,
    },
}

impl NodeLink {
    /// A link to the node of `info`, called `node` in messages, whose connections open with
    /// `config` (its timeouts).
    pub fn new(info: ConnectionInfo, config: AsyncConnectionConfig, node: String) -> Self {
        Self {
            node,
            info,
            config,
            state: RwLock::new(LinkState::New),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> LinkState {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_state(&self, state: LinkState) {
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = state;
    }

    /// The connection, opened if needed (within the connection timeout).
    pub async fn connection(
        &self,
        counters: &RedisCounters,
    ) -> Result<MultiplexedConnection, RedisError> {
        if let Some(ready) = Self::ready(self.state()) {
            return ready;
        }
        let _opening = self.opening.lock().await;
        // Another call may have opened it (or failed to) meanwhile.
        let state = self.state();
        if let Some(ready) = Self::ready(state.clone()) {
            return ready;
        }
        let was_down = matches!(state, LinkState::Down { .. });
        let opened = async {
            redis::Client::open(self.info.clone())?
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
        };
        match opened.await {
            Ok(connection) => {
                counters.count(&counters.connections);
                if was_down {
                    counters.count(&counters.reconnects);
                    counters.emit(StoreEvent::Reconnected {
                        node: self.node.clone(),
                    });
                }
                self.set_state(LinkState::Open(connection.clone()));
                Ok(connection)
            }
            Err(error) => {
                if !was_down {
                    counters.emit(self.lost(&error));
                }
                self.set_state(LinkState::Down {
                    since: Instant::now(),
                    error: error.clone(),
                });
                Err(error)
            }
        }
    }

    /// What a call gets without opening anything: the open connection, or the error of a
    /// node that failed less than [`DOWN_FOR`] ago.
    fn ready(state: LinkState) -> Option<Result<MultiplexedConnection, RedisError>> {
        match state {
            LinkState::Open(connection) => Some(Ok(connection)),
            LinkState::Down { since, error } if since.elapsed() < DOWN_FOR => Some(Err(error)),
            _ => None,
        }
    }

    fn lost(&self, error: &RedisError) -> StoreEvent {
        StoreEvent::Lost {
            node: self.node.clone(),
            message: error.to_string(),
        }
    }

    /// Drops the connection (calls holding it finish on it).
    pub fn close(&self) {
        self.set_state(LinkState::New);
    }

    /// Where the node is and how to log in to it.
    pub fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// Whether the connection is open (as far as is known).
    pub fn is_open(&self) -> bool {
        // (Read in place: a clone of the connection costs a lone call's offer two atomic updates.)
        matches!(
            *self.state.read().unwrap_or_else(|p| p.into_inner()),
            LinkState::Open(_)
        )
    }

    /// After `error` on the open connection: when it says the connection is gone, the next
    /// call reopens it (not before [`DOWN_FOR`]).
    pub fn failed(&self, error: &RedisError, counters: &RedisCounters) {
        if !is_connection_failure(error) {
            return;
        }
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        if matches!(*state, LinkState::Open(_)) {
            *state = LinkState::Down {
                since: Instant::now(),
                error: error.clone(),
            };
            drop(state);
            counters.emit(self.lost(error));
        }
    }
}

/// Whether `error` says the connection itself is gone: not a command that Redis refused, nor
/// one that timed out (a stalled server keeps its connection, which works again when it
/// resumes; a new one would stall just the same).
pub fn is_connection_failure(error: &RedisError) -> bool {
    !error.is_timeout()
        && (error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal())
}

/// How a node's connections open: within `connect_timeout`, each command answered within
/// `command_timeout`.
pub fn connection_config(
    connect_timeout: Duration,
    command_timeout: Duration,
) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(command_timeout))
}

/// `template` (credentials, database, TLS settings) at `host:port`.
pub fn info_at(template: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    template.clone().set_addr(addr)
}

/// `host:port`, or a unix socket's path: never a password.
pub fn address_of(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => "(unknown address)".to_owned(),
    }
}

/// A change in the store's reach of one Redis node: reported once per outage of that node,
/// not once per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreEvent {
    /// The node's connection failed, or could not be opened, where it had worked or was never
    /// tried.
    Lost { node: String, message: String },
    /// The node's connection was opened again after it had failed.
    Reconnected { node: String },
}

/// Receives a store's events (on the store's runtime thread: it must not block).
pub type EventListener = Box<dyn Fn(StoreEvent) + Send + Sync>;

/// What a store has done, for `stats()`.
#[derive(Default)]
pub struct RedisCounters {
    /// Calls run (each call of a batch counts).
    pub calls: AtomicU64,
    /// Calls that failed with `ERR_STORE_UNAVAILABLE`.
    pub unavailable: AtomicU64,
    /// Calls that failed with `ERR_STORE_ERROR`.
    pub errors: AtomicU64,
    /// Calls that failed with `ERR_STORE_CLOSED`.
    pub closed: AtomicU64,
    /// Connections opened.
    pub connections: AtomicU64,
    /// Connections opened again after a failure.
    pub reconnects: AtomicU64,
    /// Scripts (or their Function libraries) loaded after Redis answered that it had none
    /// (`NOSCRIPT`, "Function not found").
    pub script_loads: AtomicU64,
    /// Scripts go as `EVALSHA`, not `FCALL` (see [`super::script`]): the store's `functions`
    /// option is `false`, or Redis refused Functions (Redis 6.2, an ACL).
    pub eval_only: AtomicBool,
    /// Script calls sent (a batch is one).
    pub batches: AtomicU64,
    /// Calls carried by those script calls.
    pub batched_calls: AtomicU64,
    listener: Mutex<Option<EventListener>>,
}

impl RedisCounters {
    pub fn count(&self, counter: &AtomicU64) {
        self.add(counter, 1);
    }

    pub fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Hands every later event to `listener` (replacing the previous one).
    pub fn listen(&self, listener: EventListener) {
        *self.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(listener);
    }

    pub fn emit(&self, event: StoreEvent) {
        if let Some(listener) = &*self.listener.lock().unwrap_or_else(|p| p.into_inner()) {
            listener(event);
        }
    }
}
