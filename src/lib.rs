//! ratekeeper: fast, correct, distributed rate limiting for Node.js, on Redis or in memory.
//!
//! The crate has three layers:
//! - algorithms, pure and clock-free: [`rolling_window`];
//! - stores: [`store::memory`] (per-id state in this process) and [`store::redis`] (Lua scripts
//!   from `lua/` on one multiplexed connection);
//! - the napi binding ([`binding`]), which JavaScript sees through `index.js`.
//!
//! ```
//! use ratekeeper::rolling_window::{RollingWindow, Timeline};
//!
//! // At most 2 actions per 10 ms.
//! let window = RollingWindow::new(10.0, 2.0, 0.0, true).unwrap();
//! let mut log = Timeline::default();
//! assert!(!log.attempt(&window, 0).blocked);
//! assert!(!log.attempt(&window, 1_000).blocked);
//! let third = log.attempt(&window, 2_000);
//! assert!(third.blocked);
//! assert_eq!(third.millis_until_allowed(), 9); // at 11 ms the action at 1 ms is the oldest
//! ```

#[cfg(feature = "node")]
pub mod binding;
pub mod bucket_circle;
pub mod error;
pub mod expiring_counter;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod rolling_window;
pub mod sliding_tail;
pub mod sliding_window;
pub mod store;
pub mod time;
pub mod token_bucket;
pub mod verdict;
