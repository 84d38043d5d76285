//! Ctrl-C while a turn is watched: counted, not fatal, so the watch can
//! cancel the turn on the first press and stop watching on the second
//! (`follow::watch` acts on the count).
//!
//! What must stay true: presses are counted by a thread reading
//! `signal-hook`'s self-pipe (its handler is installed with `SA_RESTART`, so
//! a press never turns a blocking read of the socket into an error); the
//! thread ends when the [`Interrupts`] guard drops. signal-hook never puts
//! the default action back, so once a watch began, Ctrl-C stays counted
//! until the command exits, which it does right after the watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::consts::SIGINT;
use signal_hook::iterator::{Handle, Signals};

/// Ctrl-C presses counted while this lives.
pub(super) struct Interrupts {
    /// Presses since [`Interrupts::install`].
    presses: Arc<AtomicUsize>,
    /// Closes the signal iterator, ending the counting thread.
    handle: Option<Handle>,
}

impl Interrupts {
    /// Starts counting Ctrl-C presses from zero. When the handler cannot be
    /// installed, Ctrl-C keeps its default effect and the count stays 0.
    pub(super) fn install() -> Interrupts {
        let presses = Arc::new(AtomicUsize::new(0));
        let handle = Signals::new([SIGINT]).ok().map(|mut signals| {
            let handle = signals.handle();
            let count = presses.clone();
            std::thread::spawn(move || {
                for _ in signals.forever() {
                    count.fetch_add(1, Ordering::SeqCst);
                }
            });
            handle
        });
        Interrupts { presses, handle }
    }

    /// How many times Ctrl-C was pressed since [`Interrupts::install`].
    pub(super) fn presses(&self) -> usize {
        self.presses.load(Ordering::SeqCst)
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.close();
        }
    }
}

impl std::fmt::Debug for Interrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Interrupts({})", self.presses())
    }
}
