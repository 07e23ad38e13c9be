//! Which Application a value is: its namespace and name, read one way everywhere.

use std::fmt;

use serde_json::Value;

/// An Application's namespace and name, borrowed from the object read from the API server.
/// A field the object lacks reads as empty, which no API server object has: the caller's
/// messages then show the gap instead of a guessed name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

impl<'a> Identity<'a> {
    pub fn of(app: &'a Value) -> Self {
        Self {
            namespace: app["metadata"]["namespace"].as_str().unwrap_or_default(),
            name: app["metadata"]["name"].as_str().unwrap_or_default(),
        }
    }
}

/// `namespace/name`, as `kubectl` and Argo CD's CLI name an Application.
impl fmt::Display for Identity<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_application_is_named_by_its_namespace_and_name() {
        let app = json!({"metadata": {"namespace": "argocd", "name": "web"}});
        assert_eq!(Identity::of(&app).to_string(), "argocd/web");
    }

    #[test]
    fn a_missing_field_reads_as_empty_not_as_a_guess() {
        let app = json!({"metadata": {"name": "web"}});
        let id = Identity::of(&app);
        assert_eq!((id.namespace, id.name), ("", "web"));
        assert_eq!(Identity::of(&json!(null)).to_string(), "/");
    }
}
