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

/// An error with its causes, outermost first, each once: tonic's "transport error" alone
/// does not say that a certificate was refused, or why.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_chain_names_every_cause_once() {
        let tls = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let transport = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, tls);
        // io::Error displays its inner error too: not repeated.
        assert_eq!(
            super::error_chain(&transport),
            "invalid peer certificate: UnknownIssuer"
        );
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other(
            "invalid peer certificate: UnknownIssuer",
        ));
        assert_eq!(
            super::error_chain(&e),
            "transport error: invalid peer certificate: UnknownIssuer"
        );
    }
}
