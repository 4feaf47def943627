//! How to reach Redis: the user's connection settings, checked and turned into redis-rs
//! connection infos. Error messages name the option and never echo a URL (it may hold a
//! password).

use std::time::Duration;

use redis::{
    ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError,
    TlsCertificates,
};

use crate::error::{ErrorCode, Failure, Outcome};

/// Default for `connectTimeoutMs` and `commandTimeoutMs`.
pub const DEFAULT_TIMEOUT_MS: f64 = 1000.0;
/// The longest timeout accepted: ten minutes.
pub const MAX_TIMEOUT_MS: f64 = 600_000.0;

/// How to reach Redis, as the user gave it (every field optional).
#[derive(Debug, Clone, Default)]
pub struct RedisSettings {
    pub url: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<i64>,
    pub tls: Option<bool>,
    /// TLS settings beyond on/off (a private CA, a client certificate, ...); imply `tls`.
    pub tls_options: Option<TlsSettings>,
    /// URLs of some Cluster nodes: the store then speaks Redis Cluster.
    pub cluster: Option<Vec<String>>,
    pub connect_timeout_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
}

/// TLS settings, with Node's `tls.connect` names.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// Certificates (PEM) to trust instead of the system's.
    pub ca: Option<Vec<u8>>,
    /// A client certificate (PEM), for servers that ask for one (`tls-auth-clients`).
    pub cert: Option<Vec<u8>>,
    /// The client certificate's private key (PEM).
    pub key: Option<Vec<u8>>,
    /// The name the server's certificate must carry, when not the host connected to.
    pub servername: Option<String>,
    /// `false` accepts any certificate (tests only). Default `true`.
    pub reject_unauthorized: Option<bool>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    pub(super) nodes: Vec<ConnectionInfo>,
    pub(super) cluster: bool,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
    /// `host:port` of the first node, for error messages (never a password).
    pub(super) endpoint: String,
    /// With `tls.servername`: the name the connection info carries as its host (so that TLS
    /// checks the certificate against it), and the real host to connect to.
    pub(super) server_name: Option<(String, String)>,
}

impl RedisConfig {
    pub fn from_settings(settings: RedisSettings) -> Outcome<Self> {
        let connect_timeout = timeout_option("connectTimeoutMs", settings.connect_timeout_ms)?;
        let command_timeout = timeout_option("commandTimeoutMs", settings.command_timeout_ms)?;
        let cluster = settings.cluster.is_some();
        let servername = settings
            .tls_options
            .as_ref()
            .and_then(|tls| tls.servername.clone());
        if cluster && servername.is_some() {
            return Err(invalid(
                "`tls.servername` is for a single node: a Cluster's nodes each have their own name",
            ));
        }
        let nodes = match &settings.cluster {
            Some(urls) if urls.is_empty() => {
                return Err(invalid("`cluster` must list at least one node URL"));
            }
            Some(urls) => urls
                .iter()
                .map(|url| node_info(Some(url), &settings, "cluster"))
                .collect::<Outcome<Vec<_>>>()?,
            None => vec![node_info(settings.url.as_deref(), &settings, "url")?],
        };
        if cluster && settings.db.is_some_and(|db| db != 0) {
            return Err(invalid(
                "`db` must be 0 with `cluster`: Redis Cluster has one database",
            ));
        }
        let endpoint = super::link::address_of(nodes[0].addr());
        let (nodes, server_name) = match (servername, nodes[0].addr()) {
            (Some(name), ConnectionAddr::TcpTls { host, .. }) => {
                let host = host.clone();
                let info = nodes[0].clone();
                let addr = match info.addr().clone() {
                    ConnectionAddr::TcpTls {
                        port,
                        insecure,
                        tls_params,
                        ..
                    } => ConnectionAddr::TcpTls {
                        host: name.clone(),
                        port,
                        insecure,
                        tls_params,
                    },
                    other => other,
                };
                (vec![info.set_addr(addr)], Some((name, host)))
            }
            (Some(_), _) => {
                return Err(invalid("`tls.servername` needs a TCP connection with TLS"))
            }
            (None, _) => (nodes, None),
        };
        Ok(Self {
            nodes,
            cluster,
            connect_timeout,
            command_timeout,
            endpoint,
            server_name,
        })
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `commandTimeoutMs`: every call answers or fails within it.
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::range_error(ErrorCode::InvalidOption, message)
}

fn timeout_option(name: &str, ms: Option<f64>) -> Outcome<Duration> {
    let ms = ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !ms.is_finite() || !(1.0..=MAX_TIMEOUT_MS).contains(&ms) {
        return Err(invalid(format!(
            "`{name}` must be a number of milliseconds from 1 to {MAX_TIMEOUT_MS}, got {ms}"
        )));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// One node's connection info: its URL (or host and port), then the explicit options on top.
fn node_info(url: Option<&str>, s: &RedisSettings, url_option: &str) -> Outcome<ConnectionInfo> {
    let info = match url {
        // The URL itself is not echoed: it may hold a password.
        Some(url) => url.into_connection_info().map_err(|e| {
            invalid(format!(
                "`{url_option}` is not a valid Redis URL (redis://, rediss:// or redis+unix://): {}",
                e.kind_description()
            ))
        })?,
        None => {
            let host = s.host.clone().unwrap_or_else(|| "127.0.0.1".into());
            let port = s.port.unwrap_or(6379);
            (host.as_str(), port)
                .into_connection_info()
                .map_err(|e| invalid(format!("`host` is not valid: {}", e.kind_description())))?
        }
    };
    let mut redis = info.redis_settings().clone();
    if let Some(username) = &s.username {
        redis = redis.set_username(username);
    }
    if let Some(password) = &s.password {
        redis = redis.set_password(password);
    }
    if let Some(db) = s.db {
        redis = redis.set_db(db);
    }
    let mut info = info.set_redis_settings(redis);
    let tls = s.tls_options.as_ref();
    if s.tls == Some(true) || tls.is_some() {
        if let ConnectionAddr::Tcp(host, port) = info.addr().clone() {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            });
        }
    }
    match (tls, info.addr().clone()) {
        (
            Some(tls),
            ConnectionAddr::TcpTls {
                host,
                port,
                tls_params,
                ..
            },
        ) => {
            // `rejectUnauthorized: false` accepts any certificate, as in Node.
            let insecure = tls.reject_unauthorized == Some(false);
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            });
            with_certificates(info, tls)
        }
        (Some(_), _) => Err(invalid("`tls` needs a TCP connection (not a unix socket)")),
        (None, _) => Ok(info),
    }
}

/// `info` with the CA and client certificate of `tls`, checked now (bad PEM is an option error).
fn with_certificates(info: ConnectionInfo, tls: &TlsSettings) -> Outcome<ConnectionInfo> {
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: cert.clone(),
            client_key: key.clone(),
        }),
        (None, None) => None,
        _ => return Err(invalid("`tls.cert` and `tls.key` go together")),
    };
    if client_tls.is_none() && tls.ca.is_none() {
        return Ok(info);
    }
    let holds = |pem: &Option<Vec<u8>>, what: &str| {
        pem.as_ref()
            .is_none_or(|pem| String::from_utf8_lossy(pem).contains(what))
    };
    if !holds(&tls.ca, "-----BEGIN CERTIFICATE-----")
        || !holds(&tls.cert, "-----BEGIN CERTIFICATE-----")
        || !holds(&tls.key, "PRIVATE KEY-----")
    {
        return Err(invalid(
            "`tls.ca` and `tls.cert` must hold PEM certificates and `tls.key` a PEM private key",
        ));
    }
    let certificates = TlsCertificates {
        client_tls,
        root_cert: tls.ca.clone(),
    };
    redis::Client::build_with_tls(info, certificates)
        .map(|client| client.get_connection_info().clone())
        .map_err(|e| {
            invalid(format!(
                "`tls` holds a certificate or key that is not valid PEM: {}",
                e.kind_description()
            ))
        })
}

trait KindDescription {
    fn kind_description(&self) -> String;
}

impl KindDescription for RedisError {
    fn kind_description(&self) -> String {
        // redis-rs's messages for parse failures name the problem, not the URL.
        self.detail()
            .map_or_else(|| format!("{:?}", self.kind()), str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RedisSettings {
        RedisSettings::default()
    }

    #[test]
    fn host_and_port_default_to_the_local_server() {
        let config = RedisConfig::from_settings(settings()).unwrap();
        assert_eq!(config.endpoint(), "127.0.0.1:6379");
        assert!(!config.is_cluster());
    }

    #[test]
    fn url_options_are_overridden_by_explicit_ones() {
        let config = RedisConfig::from_settings(RedisSettings {
            url: Some("redis://user:secret@example.test:6380/2".into()),
            db: Some(5),
            password: Some("other".into()),
            ..settings()
        })
        .unwrap();
        let node = &config.nodes[0];
        assert_eq!(config.endpoint(), "example.test:6380");
        assert_eq!(node.redis_settings().db(), 5);
        assert_eq!(node.redis_settings().username(), Some("user"));
        assert_eq!(node.redis_settings().password(), Some("other"));
    }

    #[test]
    fn tls_upgrades_a_tcp_address() {
        let config = RedisConfig::from_settings(RedisSettings {
            host: Some("example.test".into()),
            tls: Some(true),
            ..settings()
        })
        .unwrap();
        assert!(matches!(
            config.nodes[0].addr(),
            ConnectionAddr::TcpTls { .. }
        ));
    }

    #[test]
    fn bad_urls_are_rejected_without_echoing_them() {
        let err = RedisConfig::from_settings(RedisSettings {
            url: Some("http://user:hunter2@example.test".into()),
            ..settings()
        })
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidOption);
        assert!(!err.message.contains("hunter2"), "{}", err.message);
    }

    #[test]
    fn timeouts_are_bounded() {
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            let err = RedisConfig::from_settings(RedisSettings {
                command_timeout_ms: Some(bad),
                ..settings()
            })
            .unwrap_err();
            assert!(
                err.message.contains("`commandTimeoutMs`"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn a_cluster_has_nodes_and_one_database() {
        let config = RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec![
                "redis://127.0.0.1:7000".into(),
                "redis://127.0.0.1:7001".into(),
            ]),
            ..settings()
        })
        .unwrap();
        assert!(config.is_cluster());
        assert_eq!(config.nodes.len(), 2);
        assert!(RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec![]),
            ..settings()
        })
        .is_err());
        assert!(RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec!["redis://127.0.0.1:7000".into()]),
            db: Some(1),
            ..settings()
        })
        .is_err());
    }
}
