//! Test builds only (feature `append-pauses`): holds one append between the reservation of
//! its place in the log and its publication, so that a test can show what other threads see
//! meanwhile: later records written and published (parked behind it), and the changes of
//! their commits readable, while the filled prefix stays below it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};

use parking_lot::Mutex;

struct Armed {
    reserved: Sender<()>,
    release: Receiver<()>,
}

static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
/// Whether `ARMED` holds a pause: every append of a test build reads this, not the mutex.
static ANY_ARMED: AtomicBool = AtomicBool::new(false);

/// An append held once it has reserved its place, until [`Held::release`].
pub struct Held {
    reserved: Receiver<()>,
    release: Sender<()>,
}

impl Held {
    /// Returns once the held append has reserved its place.
    pub fn wait_reserved(&self) {
        let _ = self.reserved.recv();
    }

    /// Lets the held append go on.
    pub fn release(self) {
        let _ = self.release.send(());
    }
}

/// Holds the next append, on whichever thread, once it has reserved its place.
pub fn hold_next_append() -> Held {
    let (reserved, reserved_seen) = channel();
    let (released, release) = channel();
    let mut armed = ARMED.lock();
    *armed = Some(Armed { reserved, release });
    ANY_ARMED.store(true, Ordering::Release);
    drop(armed);
    Held {
        reserved: reserved_seen,
        release: released,
    }
}

/// Called by every append right after its reservation.
pub(crate) fn after_reserving() {
    if !ANY_ARMED.load(Ordering::Acquire) {
        return;
    }
    let armed = {
        let mut armed = ARMED.lock();
        ANY_ARMED.store(false, Ordering::Release);
        armed.take()
    };
    if let Some(armed) = armed {
        let _ = armed.reserved.send(());
        let _ = armed.release.recv();
    }
}
