//! A real server on an ephemeral loopback port, in a thread of its own with
//! its own runtime, stopped (gracefully) when dropped.

use relay::Relay;
use relay_server::{Server, ServerConfig};
use std::net::SocketAddr;

pub struct ServerThread {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    pub fn start(relay: Relay, config: ServerConfig) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = Server::bind(relay, config).await.unwrap();
                addr_tx.send(server.local_addr().unwrap()).unwrap();
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr = addr_rx.recv().unwrap();
        Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The sender that stops the server, for a test that stops it itself.
    #[allow(dead_code)]
    pub fn take_stop(&mut self) -> Option<tokio::sync::oneshot::Sender<()>> {
        self.stop.take()
    }

    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop();
    }
}
