//! What the dashboard's integration tests share: a server running on a thread of its own.

#![allow(clippy::unwrap_used)]

/// A server running on a thread of its own until [`Running::stop`].
pub struct Running {
    /// `http://<its address>`.
    pub base: String,
    stop_tx: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    pub fn start(server: hone_serve::Server) -> Running {
        let base = format!("http://{}", server.local_addr());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            server
                .run_until(async {
                    let _ = stop_rx.await;
                })
                .unwrap()
        });
        Running {
            base,
            stop_tx,
            thread,
        }
    }

    /// Stops the server and waits until it has stopped.
    pub fn stop(self) {
        self.stop_tx.send(()).unwrap();
        self.thread.join().unwrap();
    }
}
