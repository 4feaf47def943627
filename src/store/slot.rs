//! Redis Cluster slots: which keys one script call may touch together.

use super::redis_config::RedisConfig;
use crate::error::{ErrorCode, Failure, Outcome};

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag (the part between the first
/// `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &key[open + 1..open + 1 + close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// On a Cluster, every key of one call must live in one slot: otherwise a clear error, naming
/// the fix (a shared hash tag).
pub fn check_one_slot(config: &RedisConfig, keys: &[String]) -> Outcome<()> {
    // (Only a Cluster has slots: a call on one node computes none.)
    let Some((first, rest)) = keys.split_first().filter(|_| config.is_cluster()) else {
        return Ok(());
    };
    let slot = key_slot(first.as_bytes());
    if rest.iter().any(|key| key_slot(key.as_bytes()) != slot) {
        return Err(Failure::range_error(
            ErrorCode::InvalidId,
            "on a Redis Cluster, the ids of one call must share a hash tag so that their keys \
             live on one node: e.g. '{user:42}ip:10.0.0.1' and '{user:42}user:42'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_follow_redis_cluster() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag does not count: the whole key is hashed.
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{baz}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }
}
