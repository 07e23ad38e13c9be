//! Amazon Q Developer in chat applications (formerly AWS Chatbot) reading an SNS message as a
//! custom notification: the message must be JSON in the documented event schema
//! (`tests/fixtures/chatbot/custom-notification.schema.json`, from "Custom notifications using
//! Amazon Q Developer in chat applications", docs.aws.amazon.com/chatbot/latest/adminguide/
//! custom-notifs.html), or the channel shows nothing of it.

use serde_json::Value;

const SCHEMA: &str = include_str!("../../fixtures/chatbot/custom-notification.schema.json");

/// Every way `message` (an SNS message's text) breaks the custom-notification schema; empty
/// when the chat integration would render it.
pub fn violations(message: &str) -> Vec<String> {
    let schema: Value = match serde_json::from_str(SCHEMA) {
        Ok(schema) => schema,
        Err(e) => return vec![format!("the schema fixture does not parse: {e}")],
    };
    let validator = match jsonschema::validator_for(&schema) {
        Ok(validator) => validator,
        Err(e) => return vec![format!("the schema fixture does not compile: {e}")],
    };
    let notification: Value = match serde_json::from_str(message) {
        Ok(notification) => notification,
        Err(e) => return vec![format!("not JSON: {e}")],
    };
    validator
        .iter_errors(&notification)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_message_in_the_documented_shape_is_rendered() {
        let cases = [
            (
                r#"{"version":"1.0","source":"custom","content":{"textType":"client-markdown","title":"t","description":"d"},"metadata":{"threadId":"x","additionalContext":{"k":"v"}}}"#,
                true,
            ),
            (
                r#"{"version":"2.0","source":"custom","content":{"title":"t","description":"d"}}"#,
                false,
            ),
            (
                r#"{"version":"1.0","source":"aws.ecr","content":{"title":"t","description":"d"}}"#,
                false,
            ),
            (
                r#"{"version":"1.0","source":"custom","content":{"title":"t","description":"d","colour":"red"}}"#,
                false,
            ),
            (
                r#"{"version":"1.0","source":"custom","content":{"title":"t","description":"d"},"metadata":{"additionalContext":{"n":1}}}"#,
                false,
            ),
            (r#"{"mode":"push","entries":[]}"#, false),
        ];
        for (message, rendered) in cases {
            let found = violations(message);
            assert_eq!(found.is_empty(), rendered, "{message}: {found:?}");
        }
    }
}
