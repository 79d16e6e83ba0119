//! The pair of servers the differential tests compare: a real `redis-server` and tailstore's
//! (in-process). Without a `redis-server` on the PATH the tests say they are skipped and pass.

use super::redis_process::{redis_program, start_redis, RedisServer};
use super::TestServer;

/// A real Redis and tailstore, side by side.
pub struct Servers {
    pub redis: RedisServer,
    pub tailstore: TestServer,
}

impl Servers {
    /// Both servers, or `None` (after saying so) when redis-server is not installed.
    pub fn start(test: &str) -> Option<Servers> {
        let Some(program) = redis_program() else {
            println!("redis-server not found: skipping {test}");
            return None;
        };
        Some(Servers {
            redis: start_redis(&program),
            tailstore: TestServer::start(),
        })
    }
}
