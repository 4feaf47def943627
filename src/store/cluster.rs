//! Redis Cluster: which primary owns a key's slot, one multiplexed connection per node, and
//! following the cluster as it changes (a failover, a slot migration).
//!
//! Why not redis-rs's `ClusterConnection`: once a call fails with no connection to a slot's
//! node, it reconnects through the seed nodes it was built with, and only them. When the seed
//! node is the primary that died, that never succeeds, so every call failed, even for ids on
//! healthy primaries, long after the replica had taken over (see `__test__/cluster-failover.test.js`).
//! Here:
//! - the slot map is read with `CLUSTER SLOTS` from any node known (the seeds and every node
//!   the cluster has reported), so the loss of any node, seed or not, is survived;
//! - a call to a primary that cannot be reached fails at once with `ERR_STORE_UNAVAILABLE`
//!   naming that node (a node whose connection just failed is not dialled again for
//!   [`super::link::DOWN_FOR`]), and every such failure asks for a new slot map (at most one per
//!   [`REFRESH_INTERVAL`]), so calls succeed again as soon as the cluster has promoted a replica;
//! - `MOVED` updates the slot and is followed, `ASK` is followed with `ASKING`, and `TRYAGAIN`
//!   (a slot half migrated) is retried shortly, all within the call's timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError,
    ServerErrorKind, Value,
};

use super::link::{connection_config, info_at, is_connection_failure, NodeLink, RedisCounters};
use super::script::{query_script, LuaScript};
use super::slot::key_slot;

const SLOTS: usize = 16384;

/// The least time between two reads of the slot map.
const REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// How many redirections (`MOVED`, `ASK`, `TRYAGAIN`) one call follows.
const MAX_REDIRECTS: usize = 5;

/// A node's address, `host:port`.
pub type Node = Arc<str>;

/// A call's failure: the node it failed at (if it got that far) and why.
pub struct NodeError {
    pub node: Option<Node>,
    pub error: RedisError,
}

/// The connections to the nodes of one Redis Cluster, and its slot map.
pub struct Cluster {
    shared: Arc<Shared>,
}

struct Shared {
    /// The nodes the user gave, tried when no other node answers.
    seeds: Vec<Node>,
    /// Credentials and TLS settings, with the first seed's address.
    template: ConnectionInfo,
    connection_config: AsyncConnectionConfig,
    slots: RwLock<SlotMap>,
    nodes: Mutex<HashMap<Node, Arc<NodeLink>>>,
    /// When the slot map was last read; held while it is being read.
    refreshed: tokio::sync::Mutex<Option<Instant>>,
    counters: Arc<RedisCounters>,
}

/// Which node serves each slot, and every node the cluster has named.
#[derive(Default)]
struct SlotMap {
    owners: Vec<Option<Node>>,
    known: Vec<Node>,
}

impl Cluster {
    pub fn new(
        seeds: &[ConnectionInfo],
        connect_timeout: Duration,
        command_timeout: Duration,
        counters: Arc<RedisCounters>,
    ) -> Self {
        let connection_config = connection_config(connect_timeout, command_timeout);
        Self {
            shared: Arc::new(Shared {
                seeds: seeds
                    .iter()
                    .filter_map(|info| node_of(info.addr()))
                    .collect(),
                template: seeds[0].clone(),
                connection_config,
                slots: RwLock::new(SlotMap::default()),
                nodes: Mutex::new(HashMap::new()),
                refreshed: tokio::sync::Mutex::new(None),
                counters,
            }),
        }
    }

    /// Reads the slot map now, unless it was read in the last [`REFRESH_INTERVAL`].
    pub async fn connect(&self) -> Result<(), NodeError> {
        self.shared.refresh().await
    }

    /// Runs `cmd` (a command on `key`, or a [`LuaScript::command`] of `script`, see
    /// [`query_script`]) on the primary that owns `key`'s slot, following redirections.
    pub async fn query(
        &self,
        key: &str,
        cmd: &Cmd,
        script: Option<&LuaScript>,
    ) -> Result<Value, NodeError> {
        let shared = &self.shared;
        let slot = key_slot(key.as_bytes());
        if shared.owner(slot).is_none() {
            shared.refresh().await?;
        }
        let mut node = shared.owner(slot).ok_or_else(|| NodeError {
            node: None,
            error: (
                ErrorKind::Server(ServerErrorKind::ClusterDown),
                "no node of the cluster serves the slot of this key",
            )
                .into(),
        })?;
        let mut asking = false;
        for _ in 0..MAX_REDIRECTS {
            let result = match shared.connection(&node).await {
                Ok(mut connection) => {
                    query_script(&mut connection, cmd, script, asking, &shared.counters).await
                }
                Err(error) => Err(error),
            };
            let error = match result {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            asking = false;
            match error.kind() {
                ErrorKind::Server(ServerErrorKind::Moved) => {
                    let Some(target) = redirect(&error) else {
                        return Err(NodeError::at(node, error));
                    };
                    shared.set_owner(slot, target.clone());
                    self.refresh_soon();
                    node = target;
                }
                ErrorKind::Server(ServerErrorKind::Ask) => {
                    let Some(target) = redirect(&error) else {
                        return Err(NodeError::at(node, error));
                    };
                    node = target;
                    asking = true;
                }
                ErrorKind::Server(ServerErrorKind::TryAgain) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => {
                    if needs_new_map(&error) {
                        shared.failed(&node, &error);
                        self.refresh_soon();
                    }
                    return Err(NodeError::at(node, error));
                }
            }
        }
        Err(NodeError::at(
            node,
            (
                ErrorKind::Server(ServerErrorKind::TryAgain),
                "too many redirections",
            )
                .into(),
        ))
    }

    /// The node that serves `key`'s slot, as far as is known.
    pub fn owner_of(&self, key: &str) -> Option<Node> {
        self.shared.owner(key_slot(key.as_bytes()))
    }

    /// Closes every connection.
    pub fn close(&self) {
        self.shared
            .nodes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }

    /// Reads the slot map again in the background (at most once per [`REFRESH_INTERVAL`]).
    fn refresh_soon(&self) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let _ = shared.refresh().await;
        });
    }
}

impl NodeError {
    fn at(node: Node, error: RedisError) -> Self {
        Self {
            node: Some(node),
            error,
        }
    }
}

impl Shared {
    fn owner(&self, slot: u16) -> Option<Node> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        slots.owners.get(usize::from(slot)).cloned().flatten()
    }

    fn set_owner(&self, slot: u16, node: Node) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        if let Some(owner) = slots.owners.get_mut(usize::from(slot)) {
            *owner = Some(node);
        }
    }

    /// Reads the slot map from the first node that answers: nodes with an open connection
    /// first, then the other known nodes, then the seeds.
    async fn refresh(&self) -> Result<(), NodeError> {
        let mut refreshed = self.refreshed.lock().await;
        if refreshed.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) && self.has_map() {
            return Ok(());
        }
        let mut last_error = None;
        for node in self.candidates() {
            let map = match self.connection(&node).await {
                Ok(mut connection) => read_slot_map(&mut connection, &node).await,
                Err(error) => Err(error),
            };
            match map {
                Ok(map) => {
                    self.install(map);
                    *refreshed = Some(Instant::now());
                    return Ok(());
                }
                Err(error) => {
                    self.failed(&node, &error);
                    last_error = Some(NodeError::at(node, error));
                }
            }
        }
        *refreshed = Some(Instant::now());
        Err(last_error.unwrap_or_else(|| NodeError {
            node: None,
            error: (ErrorKind::Io, "no node of the cluster is known").into(),
        }))
    }

    fn has_map(&self) -> bool {
        !self
            .slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .owners
            .is_empty()
    }

    fn candidates(&self) -> Vec<Node> {
        let mut known: Vec<Node> = {
            let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
            slots.known.clone()
        };
        for seed in &self.seeds {
            if !known.contains(seed) {
                known.push(seed.clone());
            }
        }
        let mut open = Vec::new();
        let mut other = Vec::new();
        for node in known {
            if self.is_open(&node) {
                open.push(node);
            } else {
                other.push(node);
            }
        }
        open.extend(other);
        open
    }

    fn is_open(&self, node: &Node) -> bool {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes.get(node).is_some_and(|link| link.is_open())
    }

    fn install(&self, map: SlotMap) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        *slots = map;
        // Connections to nodes that left the cluster are dropped.
        let known = slots.known.clone();
        drop(slots);
        self.nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|node, _| known.contains(node) || self.seeds.contains(node));
    }

    /// The link to `node`, made on first use.
    fn link(&self, node: &Node) -> Result<Arc<NodeLink>, RedisError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(link) = nodes.get(node) {
            return Ok(link.clone());
        }
        let (host, port) = split_node(node).ok_or_else(|| {
            RedisError::from((ErrorKind::InvalidClientConfig, "not a host:port address"))
        })?;
        let link = Arc::new(NodeLink::new(
            info_at(&self.template, host, port),
            self.connection_config.clone(),
            node.to_string(),
        ));
        nodes.insert(node.clone(), link.clone());
        Ok(link)
    }

    /// The connection to `node`, opened if needed.
    async fn connection(&self, node: &Node) -> Result<MultiplexedConnection, RedisError> {
        self.link(node)?.connection(&self.counters).await
    }

    fn failed(&self, node: &Node, error: &RedisError) {
        if let Ok(link) = self.link(node) {
            link.failed(error, &self.counters);
        }
    }
}

/// The node a `MOVED` or `ASK` reply points to.
fn redirect(error: &RedisError) -> Option<Node> {
    let (address, _slot) = error.redirect_node()?;
    split_node(address)?;
    Some(Arc::from(address))
}

/// Whether `error` says the node is gone or no longer serves the slot.
fn needs_new_map(error: &RedisError) -> bool {
    is_connection_failure(error)
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::BusyLoading
            )
        )
}

/// `CLUSTER SLOTS`, as a slot map. A node listed without an address (`""` or `"?"`) is the one
/// asked.
async fn read_slot_map(
    connection: &mut MultiplexedConnection,
    asked: &Node,
) -> Result<SlotMap, RedisError> {
    let reply: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(connection)
        .await?;
    let malformed = || RedisError::from((ErrorKind::Parse, "malformed CLUSTER SLOTS reply"));
    let asked_host = split_node(asked).map(|(host, _)| host).unwrap_or_default();
    let node_at = |value: &Value| -> Option<Node> {
        let Value::Array(fields) = value else {
            return None;
        };
        let host = match fields.first()? {
            Value::BulkString(host) => String::from_utf8_lossy(host).into_owned(),
            Value::SimpleString(host) => host.clone(),
            _ => return None,
        };
        let Value::Int(port) = fields.get(1)? else {
            return None;
        };
        let host = if host.is_empty() || host == "?" {
            asked_host.clone()
        } else {
            host
        };
        Some(Arc::from(format!("{host}:{port}")))
    };
    let Value::Array(ranges) = reply else {
        return Err(malformed());
    };
    let mut map = SlotMap {
        owners: vec![None; SLOTS],
        known: Vec::new(),
    };
    for range in &ranges {
        let Value::Array(range) = range else {
            return Err(malformed());
        };
        let (Some(Value::Int(start)), Some(Value::Int(end))) = (range.first(), range.get(1)) else {
            return Err(malformed());
        };
        let (start, end) = (*start as usize, *end as usize);
        if start > end || end >= SLOTS {
            return Err(malformed());
        }
        let primary = range.get(2).and_then(node_at).ok_or_else(malformed)?;
        for owner in &mut map.owners[start..=end] {
            *owner = Some(primary.clone());
        }
        for node in range[2..].iter().filter_map(node_at) {
            if !map.known.contains(&node) {
                map.known.push(node);
            }
        }
    }
    Ok(map)
}

fn node_of(addr: &ConnectionAddr) -> Option<Node> {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some(Arc::from(format!("{host}:{port}")))
        }
        _ => None,
    }
}

/// `host:port` (the host may be an IPv6 address with colons) into its parts.
pub(super) fn split_node(node: &str) -> Option<(String, u16)> {
    let (host, port) = node.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_split_at_the_last_colon() {
        assert_eq!(
            split_node("127.0.0.1:7000"),
            Some(("127.0.0.1".into(), 7000))
        );
        assert_eq!(split_node("[::1]:7000"), Some(("::1".into(), 7000)));
        assert_eq!(split_node("::1:7000"), Some(("::1".into(), 7000)));
        assert_eq!(split_node("localhost"), None);
        assert_eq!(split_node("host:port"), None);
    }
}
