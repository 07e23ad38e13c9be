//! The settings of AWS's managed Argo CD, the EKS capability for Argo CD
//! (`ARGOCD_EKS_CAPABILITY`), and the form of the SNS report (`NOTIFICATION_FORMAT`).
//!
//! The capability's controllers run on AWS's side and reconcile Applications in one
//! namespace of the cluster the capability is created on (the hub): an Application anywhere
//! else is never synced, so a write there would never go live. With the capability on, the
//! function keeps to that namespace ([`Capability::skip_reason`]) and refuses a cluster-wide
//! listing at cold start. The capability has no Notifications controller either: the report
//! can go out as Amazon Q Developer in chat applications' custom notification instead
//! ([`NotificationFormat::Chat`], built in `report::chat`).

use crate::config::NamespaceScope;
use crate::failure::Refused;

/// The EKS capability for Argo CD reconciles the Applications of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    /// The capability's namespace (`ARGOCD_NAMESPACE`, else the one `ARGOCD_NAMESPACES`
    /// entry, else `argocd`).
    pub namespace: String,
}

impl Capability {
    /// Why an Application in `namespace` is left alone, if it is: the capability never
    /// reconciles it, so a write would never roll out.
    pub fn skip_reason(&self, namespace: &str) -> Option<String> {
        (namespace != self.namespace).then(|| {
            format!(
                "in namespace `{namespace}`, which the EKS capability for Argo CD does not reconcile (its Applications live in `{}`): nothing written, as the write would never roll out; move the Application to `{}`, or drop `{namespace}` from ARGOCD_NAMESPACES",
                self.namespace, self.namespace
            )
        })
    }
}

/// `ARGOCD_EKS_CAPABILITY` read against the namespaces listed: `None` when off. On, a
/// cluster-wide listing is refused (the capability reconciles one namespace, and the
/// managed layout grants nothing cluster-wide).
pub fn capability(
    on: bool,
    scopes: &[(&str, &NamespaceScope)],
    argocd_namespace: &str,
) -> Result<Option<Capability>, Refused> {
    if !on {
        return Ok(None);
    }
    for (cluster, scope) in scopes {
        match scope {
            NamespaceScope::All => {
                return Err(Refused(format!(
                    "is true but cluster `{cluster}` lists every namespace (`*`, in ARGOCD_NAMESPACES or its CLUSTERS entry): the EKS capability for Argo CD reconciles only the Applications of its own namespace and the managed layout grants nothing cluster-wide; list `{argocd_namespace}` only"
                )));
            }
            NamespaceScope::Only(listed) if !listed.iter().any(|n| n == argocd_namespace) => {
                return Err(Refused(format!(
                    "is true but cluster `{cluster}` does not list the capability's namespace `{argocd_namespace}` (ARGOCD_NAMESPACE), only {}: every Application would be skipped; list `{argocd_namespace}`, or set ARGOCD_NAMESPACE to the namespace the capability was created with",
                    listed.join(", ")
                )));
            }
            NamespaceScope::Only(_) => {}
        }
    }
    Ok(Some(Capability {
        namespace: argocd_namespace.to_string(),
    }))
}

/// What the SNS report is sent as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NotificationFormat {
    /// The report as JSON, for programs (the default).
    #[default]
    Report,
    /// Amazon Q Developer in chat applications' custom notification, which it renders in
    /// Slack, Microsoft Teams or Chime without glue code.
    Chat,
}

/// `NOTIFICATION_FORMAT`: `report` (or unset) or `chat`.
pub fn notification_format(value: Option<&str>) -> Result<NotificationFormat, Refused> {
    match value.map(str::trim) {
        None | Some("" | "report") => Ok(NotificationFormat::Report),
        Some("chat") => Ok(NotificationFormat::Chat),
        Some(other) => Err(Refused(format!(
            "`{other}` is neither `report` (the report as JSON) nor `chat` (Amazon Q Developer in chat applications' custom notification)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(namespaces: &[&str]) -> NamespaceScope {
        NamespaceScope::Only(namespaces.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn the_capability_keeps_to_its_namespace_and_refuses_a_listing_beyond_or_without_it() {
        let argocd = only(&["argocd"]);
        let teams = only(&["team-a", "team-b"]);
        type Case<'a> = (
            &'a str,
            bool,
            Vec<(&'a str, &'a NamespaceScope)>,
            Result<Option<&'a str>, &'a str>,
        );
        let cases: [Case; 6] = [
            (
                "off, cluster-wide",
                false,
                vec![("hub", &NamespaceScope::All)],
                Ok(None),
            ),
            ("off, any list", false, vec![("hub", &teams)], Ok(None)),
            (
                "on, its namespace",
                true,
                vec![("hub", &argocd)],
                Ok(Some("argocd")),
            ),
            (
                "on, cluster-wide",
                true,
                vec![("hub", &NamespaceScope::All)],
                Err("cluster `hub` lists every namespace"),
            ),
            (
                "on, a later CLUSTERS entry cluster-wide",
                true,
                vec![("hub", &argocd), ("spoke", &NamespaceScope::All)],
                Err("cluster `spoke` lists every namespace"),
            ),
            (
                "on, its namespace not listed",
                true,
                vec![("hub", &teams)],
                Err("does not list the capability's namespace `argocd`"),
            ),
        ];
        for (case, on, scopes, expected) in cases {
            let got = capability(on, &scopes, "argocd");
            match (got, expected) {
                (Ok(c), Ok(ns)) => {
                    assert_eq!(c.map(|c| c.namespace), ns.map(String::from), "{case}")
                }
                (Err(Refused(problem)), Err(fix)) => {
                    assert!(problem.contains(fix), "{case}: {problem}")
                }
                (got, expected) => panic!("{case}: {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn an_application_outside_the_capabilitys_namespace_is_skipped_saying_where_to_move_it() {
        let capability = Capability {
            namespace: "argocd".into(),
        };
        let cases = [
            ("argocd", None),
            ("team-a", Some("move the Application to `argocd`")),
            ("argocd-apps", Some("in namespace `argocd-apps`")),
        ];
        for (namespace, expected) in cases {
            let reason = capability.skip_reason(namespace);
            match (reason, expected) {
                (None, None) => {}
                (Some(reason), Some(part)) => assert!(reason.contains(part), "{reason}"),
                (reason, expected) => panic!("{namespace}: {reason:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn the_notification_format_is_the_report_unless_chat_is_asked_for() {
        let cases = [
            (None, Ok(NotificationFormat::Report)),
            (Some("report"), Ok(NotificationFormat::Report)),
            (Some("chat"), Ok(NotificationFormat::Chat)),
            (Some("slack"), Err("neither `report`")),
        ];
        for (value, expected) in cases {
            match (notification_format(value), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(Refused(problem)), Err(part)) => assert!(problem.contains(part), "{problem}"),
                (got, expected) => panic!("{value:?}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
