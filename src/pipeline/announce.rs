//! What an invocation tells the outside besides its return value: the Kubernetes Event of
//! an update, and the report published to SNS. Neither decides anything, so neither can fail
//! an invocation: what cannot be sent is logged.

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::application::app::Application;
use crate::cluster::kube::KubeClient;
use crate::report::{Entry, Report};

/// Records the `ImagesUpdated` Event of a write on the Application.
pub async fn record_event(
    kube: &KubeClient,
    app: &Application<'_>,
    entries: &[Entry],
    now: OffsetDateTime,
) {
    let stamp = now.format(&Rfc3339).unwrap_or_default();
    let event = crate::report::events::images_updated(
        &app.involved(),
        entries,
        &stamp,
        now.unix_timestamp_nanos(),
    );
    send(kube, app, &event, "ImagesUpdated").await;
    if let Some(event) = crate::report::events::rolled_back(&app.involved(), entries, &stamp) {
        match kube.create_event(app.names().0, &event).await {
            Ok(()) | Err(crate::cluster::kube::KubeError::Conflict { .. }) => {}
            Err(e) => {
                tracing::warn!(application = %app.identity(), error = %e, "cannot record the RolledBack event");
            }
        }
    }
}

/// Records the `ChartUpdated` Event of a write of chart versions on the Application.
pub async fn record_chart_event(
    kube: &KubeClient,
    app: &Application<'_>,
    entries: &[Entry],
    now: OffsetDateTime,
) {
    let stamp = now.format(&Rfc3339).unwrap_or_default();
    let event = crate::report::events::chart_updated(
        &app.involved(),
        entries,
        &stamp,
        now.unix_timestamp_nanos(),
    );
    send(kube, app, &event, "ChartUpdated").await;
}

/// Creates `event` about `app`; a failure is logged, never the write's.
async fn send(kube: &KubeClient, app: &Application<'_>, event: &Value, reason: &str) {
    let (namespace, name) = app.names();
    if let Err(e) = kube.create_event(namespace, event).await {
        tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "cannot record the {reason} event");
    }
}

/// Records the `RollbackRespected` Event of a decision that left a manual rollback alone, once
/// per rollback: a later decision respecting the same rollback finds it recorded (409).
/// Returns whether a request was made.
pub async fn record_rollback(
    kube: &KubeClient,
    app: &Application<'_>,
    entries: &[Entry],
    now: OffsetDateTime,
) -> bool {
    let stamp = now.format(&Rfc3339).unwrap_or_default();
    let Some(event) = crate::report::events::rollback_respected(&app.involved(), entries, &stamp)
    else {
        return false;
    };
    let (namespace, name) = app.names();
    match kube.create_event(namespace, &event).await {
        Ok(()) | Err(crate::cluster::kube::KubeError::Conflict { .. }) => {}
        Err(e) => {
            tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "cannot record the RollbackRespected event");
        }
    }
    true
}

/// Publishes the report to `topic` when something moved or failed, as
/// [`crate::report::sns::message`] builds it.
pub async fn publish_report(
    sns: &aws_sdk_sns::Client,
    topic: &str,
    format: crate::config::managed::NotificationFormat,
    report: &Report,
) {
    let message = match crate::report::sns::message(report, format) {
        None => return,
        Some(Ok(message)) => message,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "cannot serialise the report for the notification");
            return;
        }
    };
    let sent = sns
        .publish()
        .topic_arn(topic)
        .subject(message.subject)
        .message(message.body)
        .send()
        .await;
    if let Err(e) = sent {
        let described = crate::aws::aws_error::describe(&e);
        tracing::warn!(topic = %topic, error = %described, "cannot publish the decision report");
    }
}
