//! The template as CloudFormation runs it: intrinsic functions evaluated with a stack's
//! parameter values, and the names and ARNs CloudFormation gives the resources a stack of it
//! makes. The template tests evaluate the transformed template with it, and
//! `deployment::Deployment::from_template` builds from it the stack `doctor` reads, so both
//! see the values the cloud computes, not the template's text.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The template after the SAM transform (`scripts/transform_template.py`), kept beside the
/// fixtures; a template test fails when it no longer matches what the transform prints.
pub const TRANSFORMED_TEMPLATE: &str = include_str!("../../fixtures/template.transformed.json");

/// What a `Ref` to a resource and its `Fn::GetAtt` attributes give, once it exists.
#[derive(Debug, Clone, Default)]
pub struct Physical {
    pub reference: Value,
    pub attributes: BTreeMap<String, Value>,
}

/// Evaluates intrinsic functions as CloudFormation would with `parameters`. A resource not
/// in `resources` keeps its `Ref`, and its `Fn::GetAtt` reads `GetAtt:<logical ID>`, so a
/// test sees which resource a value names without a stack.
pub struct Evaluator<'a> {
    pub parameters: BTreeMap<&'a str, Value>,
    pub conditions: &'a Value,
    pub resources: BTreeMap<String, Physical>,
}

impl<'a> Evaluator<'a> {
    pub fn new(parameters: BTreeMap<&'a str, Value>, conditions: &'a Value) -> Self {
        Self {
            parameters,
            conditions,
            resources: BTreeMap::new(),
        }
    }

    pub fn text(&self, value: &Value) -> String {
        match self.eval(value) {
            Value::String(s) => s,
            other => panic!("not a string: {other}"),
        }
    }

    pub fn list(&self, value: &Value) -> Vec<String> {
        match self.eval(value) {
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().unwrap().to_string())
                .collect(),
            other => panic!("not a list: {other}"),
        }
    }

    pub fn condition(&self, name: &str) -> bool {
        self.eval(&self.conditions[name]).as_bool().unwrap()
    }

    /// `AWS::NoValue` evaluates to `null`, which a caller reads as the property left out.
    pub fn eval(&self, value: &Value) -> Value {
        let is_function =
            |key: &String| key.starts_with("Fn::") || key == "Ref" || key == "Condition";
        let Some(object) = value
            .as_object()
            .filter(|o| o.len() == 1 && o.keys().all(is_function))
        else {
            return match value {
                Value::Array(items) => Value::Array(items.iter().map(|i| self.eval(i)).collect()),
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(k, v)| (k.clone(), self.eval(v)))
                        .filter(|(_, v)| !v.is_null())
                        .collect(),
                ),
                other => other.clone(),
            };
        };
        let (function, args) = object.iter().next().unwrap();
        match function.as_str() {
            "Ref" => {
                let name = args.as_str().unwrap();
                if name == "AWS::NoValue" {
                    return Value::Null;
                }
                self.parameters
                    .get(name)
                    .cloned()
                    .or_else(|| self.resources.get(name).map(|r| r.reference.clone()))
                    .unwrap_or_else(|| value.clone())
            }
            "Condition" => json!(self.condition(args.as_str().unwrap())),
            "Fn::If" => {
                let branch = if self.condition(args[0].as_str().unwrap()) {
                    1
                } else {
                    2
                };
                self.eval(&args[branch])
            }
            // CloudFormation compares the string forms: a Number parameter ("-1") equals -1.
            "Fn::Equals" => json!(scalar(&self.eval(&args[0])) == scalar(&self.eval(&args[1]))),
            "Fn::Not" => json!(!self.eval(&args[0]).as_bool().unwrap()),
            "Fn::Or" => json!(
                args.as_array()
                    .unwrap()
                    .iter()
                    .any(|c| self.eval(c).as_bool().unwrap())
            ),
            "Fn::And" => json!(
                args.as_array()
                    .unwrap()
                    .iter()
                    .all(|c| self.eval(c).as_bool().unwrap())
            ),
            "Fn::Join" => {
                let items: Vec<String> = match self.eval(&args[1]) {
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().unwrap().to_string())
                        .collect(),
                    other => panic!("Join of {other}"),
                };
                json!(items.join(args[0].as_str().unwrap()))
            }
            "Fn::Split" => json!(
                self.text(&args[1])
                    .split(args[0].as_str().unwrap())
                    .collect::<Vec<_>>()
            ),
            "Fn::Select" => {
                let index = args[0].as_u64().unwrap() as usize;
                let items = self.list(&args[1]);
                assert!(
                    index < items.len(),
                    "Fn::Select past the end fails the stack"
                );
                json!(items[index])
            }
            "Fn::Sub" => {
                let (mut text, variables) = match args {
                    Value::String(s) => (s.clone(), serde_json::Map::new()),
                    Value::Array(pair) => (
                        pair[0].as_str().unwrap().to_string(),
                        pair[1].as_object().unwrap().clone(),
                    ),
                    other => panic!("Sub of {other}"),
                };
                for (name, value) in &variables {
                    text = text.replace(&format!("${{{name}}}"), &self.text(value));
                }
                for (name, value) in &self.parameters {
                    if let Some(s) = value.as_str() {
                        text = text.replace(&format!("${{{name}}}"), s);
                    }
                }
                for (name, resource) in &self.resources {
                    if let Some(s) = resource.reference.as_str() {
                        text = text.replace(&format!("${{{name}}}"), s);
                    }
                    for (attribute, value) in &resource.attributes {
                        if let Some(s) = value.as_str() {
                            text = text.replace(&format!("${{{name}.{attribute}}}"), s);
                        }
                    }
                }
                json!(text)
            }
            "Fn::GetAtt" => {
                let (resource, attribute) = (args[0].as_str().unwrap(), args[1].as_str());
                self.resources
                    .get(resource)
                    .and_then(|r| r.attributes.get(attribute.unwrap_or_default()))
                    .cloned()
                    .unwrap_or_else(|| json!(format!("GetAtt:{resource}")))
            }
            _ => value.clone(),
        }
    }
}

/// Where a stack runs and what it is called: its pseudo parameters.
#[derive(Debug, Clone)]
pub struct Site {
    pub account: String,
    pub region: String,
    pub stack_name: String,
}

impl Site {
    /// The stack ID CloudFormation gives the stack (its last part is what the template
    /// names the sweep queue after).
    pub fn stack_id(&self) -> String {
        format!(
            "arn:aws:cloudformation:{}:{}:stack/{}/4c4a2f40-0a1b-11f0-9f3e-0a58a9feac02",
            self.region, self.account, self.stack_name
        )
    }
}

/// A stack's parameter values: `given`, else the template's defaults (a `CommaDelimitedList`
/// split as CloudFormation splits it), with the pseudo parameters of `site` and the two
/// parameters without a default as `scripts/transform_template.py` sets them.
pub fn stack_parameters<'a>(
    template: &'a Value,
    site: &Site,
    given: &[(&'a str, Value)],
) -> BTreeMap<&'a str, Value> {
    let mut parameters: BTreeMap<&str, Value> = BTreeMap::new();
    for (name, spec) in template["Parameters"].as_object().into_iter().flatten() {
        let default = match &spec["Default"] {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => String::new(),
        };
        let listed = spec["Type"] == "CommaDelimitedList"
            || spec["Type"]
                .as_str()
                .is_some_and(|t| t.starts_with("List<"));
        let value = if listed {
            json!(default.split(',').collect::<Vec<_>>())
        } else {
            json!(default)
        };
        parameters.insert(name.as_str(), value);
    }
    parameters.extend([
        ("AWS::AccountId", json!(site.account)),
        ("AWS::Region", json!(site.region)),
        ("AWS::Partition", json!("aws")),
        ("AWS::URLSuffix", json!("amazonaws.com")),
        ("AWS::StackName", json!(site.stack_name)),
        ("AWS::StackId", json!(site.stack_id())),
        ("ClusterName", json!("barun-dev")),
        ("EcrRepositoryNames", json!(["barun-dev-ecr"])),
    ]);
    parameters.extend(given.iter().cloned());
    parameters
}

/// The name CloudFormation generates for a resource the template does not name:
/// `<stack>-<logical ID>-<suffix>`, the suffix fixed per logical ID here so tests can name it.
pub fn generated_name(stack: &str, logical_id: &str) -> String {
    let suffix = logical_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{stack}-{logical_id}-{:06X}", suffix & 0x00FF_FFFF)
}

/// The resources of `template` a stack at `site` makes (their conditions honoured), with
/// what `Ref` and `Fn::GetAtt` give for the kinds the deployment tests read: the function
/// (named `function_name`), its role (`role_arn`), queues, topics and rules.
pub fn physical_resources(
    template: &Value,
    evaluator: &Evaluator,
    site: &Site,
    function_name: &str,
    role_arn: &str,
) -> BTreeMap<String, Physical> {
    let (region, account) = (&site.region, &site.account);
    let mut made = BTreeMap::new();
    for (logical, resource) in template["Resources"].as_object().into_iter().flatten() {
        if let Some(condition) = resource["Condition"].as_str()
            && !evaluator.condition(condition)
        {
            continue;
        }
        let properties = &resource["Properties"];
        let named = |key: &str| match evaluator.eval(&properties[key]) {
            Value::String(name) if !name.is_empty() => name,
            _ => generated_name(&site.stack_name, logical),
        };
        let physical = match resource["Type"].as_str().unwrap_or_default() {
            "AWS::Lambda::Function" => {
                let arn = format!("arn:aws:lambda:{region}:{account}:function:{function_name}");
                Physical {
                    reference: json!(function_name),
                    attributes: BTreeMap::from([("Arn".into(), json!(arn))]),
                }
            }
            "AWS::IAM::Role" => Physical {
                reference: json!(role_arn.rsplit('/').next().unwrap_or_default()),
                attributes: BTreeMap::from([("Arn".into(), json!(role_arn))]),
            },
            "AWS::SQS::Queue" => {
                let name = named("QueueName");
                Physical {
                    reference: json!(format!(
                        "https://sqs.{region}.amazonaws.com/{account}/{name}"
                    )),
                    attributes: BTreeMap::from([
                        (
                            "Arn".into(),
                            json!(format!("arn:aws:sqs:{region}:{account}:{name}")),
                        ),
                        ("QueueName".into(), json!(name)),
                    ]),
                }
            }
            "AWS::SNS::Topic" => {
                let arn = format!("arn:aws:sns:{region}:{account}:{}", named("TopicName"));
                Physical {
                    reference: json!(arn),
                    attributes: BTreeMap::from([("TopicArn".into(), json!(arn))]),
                }
            }
            "AWS::Events::Rule" => {
                let name = named("Name");
                Physical {
                    reference: json!(name),
                    attributes: BTreeMap::from([(
                        "Arn".into(),
                        json!(format!("arn:aws:events:{region}:{account}:rule/{name}")),
                    )]),
                }
            }
            _ => Physical {
                reference: json!(generated_name(&site.stack_name, logical)),
                attributes: BTreeMap::new(),
            },
        };
        made.insert(logical.clone(), physical);
    }
    made
}

/// The resources of `kind` in `template`, by logical ID, whatever their conditions.
pub fn of_type<'t>(template: &'t Value, kind: &str) -> Vec<(&'t String, &'t Value)> {
    template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r["Type"] == kind)
        .collect()
}

/// A scalar's string form, as CloudFormation compares values in `Fn::Equals`.
fn scalar(value: &Value) -> Value {
    match value {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        other => other.clone(),
    }
}
