//! Process plumbing shared by the Kairos binaries: logging set-up, shutdown signals and
//! periodic file reloads.

/// Logs to stderr; `RUST_LOG` overrides the default level (info).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log file or a pod's log keeps plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on SIGINT or SIGTERM (SIGINT only where SIGTERM cannot be watched).
pub async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Calls `f` every `every` until `stop` turns true: the loop behind the reloads of files
/// that change under a running process (token files, certificates).
pub async fn every_until(
    every: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut f: impl FnMut(),
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => f(),
            _ = stop.changed() => return,
        }
    }
}
