//! Logging set-up shared by the function and the laptop commands: our own events at a chosen
//! level, the libraries' only when they warn, every URL scrubbed before a line is written.
//! What an invocation reports as CloudWatch metrics is built with the other reports, in
//! [`crate::report::metrics`].

/// Logging: our own events at `level`, the libraries' only when they warn; JSON lines (as
/// CloudWatch Logs Insights parses them) or text.
pub fn init_tracing(level: &str, format: LogFormat) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level: tracing::Level = level.parse().unwrap_or(tracing::Level::INFO);
    // Our own events at the configured level; the libraries' only when they warn.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target("argocd_ecr_updater", level);
    // Colour only for a person at a terminal: a file or a pipe gets plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(ScrubbedLine::default)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if format == LogFormat::Json {
        // CloudWatch already stamps time; one JSON object per line is what Logs Insights parses.
        let layer = fmt
            .json()
            .flatten_event(true)
            .without_time()
            .with_current_span(false)
            .with_span_list(false);
        tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .init();
    } else {
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .init();
    }
}

/// One log line, written to standard error with every URL in it scrubbed
/// ([`crate::redact::scrub`]) when the formatter is done with it: whatever a message or a
/// field carries, no query string or userinfo reaches CloudWatch.
#[derive(Default)]
struct ScrubbedLine(Vec<u8>);

impl std::io::Write for ScrubbedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        // Most lines name no URL: they are written as they are, without a copy.
        let written = if memchr::memmem::find(&self.0, b"://").is_some() {
            std::io::stderr()
                .write_all(crate::redact::scrub(&String::from_utf8_lossy(&self.0)).as_bytes())
        } else {
            std::io::stderr().write_all(&self.0)
        };
        self.0.clear();
        written
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (what the Lambda function writes).
    Json,
}
