//! Our audit record on an Application (`argocd-ecr-updater.io/last-update`), read back: the
//! last write we made (when, for which event, which images to what, pushed when, and the
//! commit when the write was a commit) and, once the write was followed, how its rollout
//! ended; and, under `earlier`, each other image's own last write, carried forward by every
//! write that does not move it, so that what we wrote of one image (which a manual rollback
//! of it is judged against) outlives writes of the others. Only writers of the Application
//! can change it, and they may change the Application anyway: what it says is what a rollout
//! check trusts about the write it follows (pure).

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::AUDIT_ANNOTATION;

/// One image the write moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedImage {
    pub alias: Option<String>,
    /// The image as configured: `registry/repository`.
    pub image: String,
    pub from: Option<String>,
    /// What was written: a tag, a digest, or `tag@sha256:…`.
    pub to: String,
    /// When ECR received the image written, when it was known at the write.
    pub pushed: Option<OffsetDateTime>,
    /// ECR's digest of the image written, when the write knew it.
    pub digest: Option<String>,
    /// Where a patch wrote it in the spec (empty for a commit, and in records written
    /// before places were kept): what tells whether a spec, or a source Argo CD synced,
    /// still asks for this write.
    pub places: Vec<Place>,
}

/// One element a patch wrote: in the list at `list` (a JSON pointer into the Application:
/// `/spec/source/helm/parameters`, `/spec/sources/1/kustomize/images`,
/// `/spec/source/plugin/env`), the entry named `name` was set to `value`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Place {
    pub list: String,
    pub name: String,
    pub value: String,
}

impl Place {
    /// Whether `app` (an Application, or `{"spec": {"source"|"sources": …}}` built from what
    /// Argo CD synced) still has this value here: a Kustomize image entry of this name that
    /// reads the same, or every parameter or variable of this name set to it (Image Updater
    /// writes each of them).
    pub fn holds(&self, app: &Value) -> bool {
        let Some(list) = app.pointer(&self.list).and_then(Value::as_array) else {
            return false;
        };
        if self.list.ends_with("/kustomize/images") {
            return list.iter().filter_map(Value::as_str).any(|entry| {
                crate::application::sources::kustomize_entry_name(entry) == self.name
                    && entry == self.value
            });
        }
        let named: Vec<&Value> = list
            .iter()
            .filter(|e| e["name"] == self.name.as_str())
            .collect();
        !named.is_empty() && named.iter().all(|e| e["value"] == self.value.as_str())
    }
}

impl Place {
    /// Sets this place's entry in `into` to what it is in `from` (the same list, the entry of
    /// the same name): a value carried from one source into another.
    pub fn take_from(&self, from: &Value, into: &mut Value) {
        let kustomize = self.list.ends_with("/kustomize/images");
        let named = |entry: &Value| {
            if kustomize {
                entry.as_str().is_some_and(|e| {
                    crate::application::sources::kustomize_entry_name(e) == self.name
                })
            } else {
                entry["name"] == self.name.as_str()
            }
        };
        let Some(wanted) = from
            .pointer(&self.list)
            .and_then(Value::as_array)
            .and_then(|list| list.iter().find(|e| named(e)))
            .cloned()
        else {
            return;
        };
        let Some(list) = into.pointer_mut(&self.list).and_then(Value::as_array_mut) else {
            return;
        };
        for entry in list.iter_mut().filter(|e| named(e)) {
            if kustomize {
                *entry = wanted.clone();
            } else {
                entry["value"] = wanted["value"].clone();
            }
        }
    }
}

impl AuditedImage {
    /// Whether `app` still asks for this write, where the record says where it went;
    /// `None` when it does not say (a commit, or an older record).
    pub fn asked_by(&self, app: &Value) -> Option<bool> {
        (!self.places.is_empty()).then(|| self.places.iter().all(|p| p.holds(app)))
    }
}

/// How a followed rollout ended, as recorded on the Application once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedOutcome {
    /// `confirmed`, `failed` or `timed-out`.
    pub outcome: String,
    pub at: Option<OffsetDateTime>,
}

/// The audit record as the Application carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// The record's text exactly as read: a guarded write tests it unchanged.
    pub text: String,
    /// The record as JSON, to be written back with an outcome added.
    pub json: Value,
    /// When the write was made.
    pub time: OffsetDateTime,
    pub event_id: String,
    pub images: Vec<AuditedImage>,
    /// The commit, for a write by Git.
    pub commit: Option<String>,
    /// Whether that commit went to a pull request (not live until merged).
    pub pull_request: bool,
    /// The branch the commit went to.
    pub branch: Option<String>,
    pub rollout: Option<RecordedOutcome>,
    /// The number of the last rollout check sent for this write (the write sends the first):
    /// a check numbered below it is a second delivery of one already followed by another.
    pub checks: u32,
    /// When a check first saw the write live and began watching its alarms
    /// (`verification.live`): the start of its verification window.
    pub verifying_since: Option<OffsetDateTime>,
    /// Other images' last writes, made before this one.
    pub earlier: Vec<ImageWrite>,
    /// This is an earlier write read from under `earlier` ([`AuditRecord::write_at`]): its
    /// images, followed after a later write of other images; `text` and `json` are the
    /// whole record's, which an outcome is written into.
    pub carried: bool,
}

/// One image's last write: what it moved, when, and by which commit for a write by Git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageWrite {
    pub image: AuditedImage,
    pub time: OffsetDateTime,
    pub commit: Option<String>,
    pub pull_request: bool,
    pub branch: Option<String>,
    /// For a write carried forward: the field manager that had last set the Application's
    /// image lists when a later write of another image took them over (the lists are atomic,
    /// so that write became their manager), which is who set this image's value if it is no
    /// longer ours.
    pub kept_set_by: Option<String>,
    /// How this write's rollout ended, once a check recorded it.
    pub rollout: Option<RecordedOutcome>,
    /// The number of the last rollout check sent for this write.
    pub checks: u32,
    /// When its verification window began, if it is being verified.
    pub verifying_since: Option<OffsetDateTime>,
}

/// The most earlier writes a record carries: an Application tracks a handful of images;
/// past this the oldest are dropped, never the record grown without end.
pub const MAX_EARLIER: usize = 64;

fn audited_image(i: &Value) -> Option<AuditedImage> {
    Some(AuditedImage {
        alias: i["alias"].as_str().map(str::to_string),
        image: i["image"].as_str()?.to_string(),
        from: i["from"].as_str().map(str::to_string),
        to: i["to"].as_str()?.to_string(),
        pushed: rfc3339_at(&i["pushed"]),
        digest: i["digest"]
            .as_str()
            .filter(|d| d.starts_with("sha256:") && d.len() <= 100)
            .map(str::to_string),
        places: serde_json::from_value(i["at"].clone()).unwrap_or_default(),
    })
}

/// The last check sent, as recorded; a write records none and sends the first.
fn checks_sent(value: &Value) -> u32 {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1)
}

fn recorded_outcome(rollout: &Value) -> Option<RecordedOutcome> {
    rollout["outcome"].as_str().map(|outcome| RecordedOutcome {
        outcome: outcome.to_string(),
        at: rfc3339_at(&rollout["at"]),
    })
}

impl AuditRecord {
    /// The record on `app`, if it carries one that reads (a record without a time is not one
    /// of ours).
    pub fn of(app: &Value) -> Option<Self> {
        let text = app["metadata"]["annotations"][AUDIT_ANNOTATION].as_str()?;
        Self::from_json(text, serde_json::from_str(text).ok()?)
    }

    /// The record a write plan writes, as it will read back (`text` is its annotation's value).
    pub fn from_json(text: &str, json: Value) -> Option<Self> {
        let time = rfc3339_at(&json["time"])?;
        let images = json["images"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(audited_image)
            .collect();
        let earlier = json["earlier"]
            .as_array()
            .into_iter()
            .flatten()
            .take(MAX_EARLIER)
            .filter_map(|i| {
                Some(ImageWrite {
                    image: audited_image(i)?,
                    time: rfc3339_at(&i["time"])?,
                    commit: i["commit"].as_str().map(str::to_string),
                    pull_request: i["pullRequest"].as_bool().unwrap_or(false),
                    branch: i["branch"].as_str().map(str::to_string),
                    kept_set_by: i["keptSetBy"].as_str().map(str::to_string),
                    rollout: recorded_outcome(&i["rollout"]),
                    checks: checks_sent(&i["checks"]),
                    verifying_since: rfc3339_at(&i["verification"]["live"]),
                })
            })
            .collect();
        let git = &json["git"];
        // A write by Git changed no spec: where its plan would have patched says nothing.
        let mut images: Vec<AuditedImage> = images;
        if git.is_object() {
            images.iter_mut().for_each(|i| i.places.clear());
        }
        let mut earlier: Vec<ImageWrite> = earlier;
        for write in earlier.iter_mut().filter(|w| w.commit.is_some()) {
            write.image.places.clear();
        }
        let rollout = recorded_outcome(&json["rollout"]);
        Some(Self {
            text: text.to_string(),
            time,
            event_id: json["eventId"].as_str().unwrap_or_default().to_string(),
            images,
            commit: git["commit"].as_str().map(str::to_string),
            pull_request: git["pullRequest"].is_string(),
            branch: git["branch"].as_str().map(str::to_string),
            rollout,
            checks: checks_sent(&json["checks"]),
            verifying_since: rfc3339_at(&json["verification"]["live"]),
            earlier,
            json,
            carried: false,
        })
    }

    /// The last write of `image` this record knows: this write's, else the one carried
    /// forward from before.
    pub fn last_write_of(&self, image: &str) -> Option<ImageWrite> {
        if let Some(moved) = self.images.iter().find(|i| i.image == image) {
            return Some(ImageWrite {
                image: moved.clone(),
                time: self.time,
                commit: self.commit.clone(),
                pull_request: self.pull_request,
                branch: self.branch.clone(),
                kept_set_by: None,
                rollout: self.rollout.clone(),
                checks: self.checks,
                verifying_since: self.verifying_since,
            });
        }
        self.earlier
            .iter()
            .find(|w| w.image.image == image)
            .cloned()
    }

    /// What a new write that moves `moved` (images as `registry/repository`) carries forward
    /// under `earlier`: every other image's last write, the newest first, bounded. `set_by`
    /// is the field manager that last set the image lists before this write, when not us:
    /// kept with each carried write, since this write becomes the lists' manager.
    pub fn carried_forward(&self, moved: &[String], set_by: Option<&str>) -> Vec<Value> {
        let mut carried: Vec<ImageWrite> = self
            .images
            .iter()
            .filter_map(|i| self.last_write_of(&i.image))
            .chain(self.earlier.iter().cloned())
            .filter(|w| !moved.contains(&w.image.image))
            .collect();
        carried.sort_by_key(|w| std::cmp::Reverse(w.time));
        let mut seen = std::collections::BTreeSet::new();
        carried.retain(|w| seen.insert(w.image.image.clone()));
        carried.truncate(MAX_EARLIER);
        carried
            .iter()
            .map(|w| {
                let at = |t: OffsetDateTime| t.format(&Rfc3339).ok();
                let kept_set_by = set_by.or(w.kept_set_by.as_deref());
                serde_json::json!({"alias": w.image.alias, "image": w.image.image,
                    "from": w.image.from, "to": w.image.to, "pushed": w.image.pushed.and_then(at), "digest": w.image.digest,
                    "time": at(w.time), "commit": w.commit, "pullRequest": w.pull_request,
                    "branch": w.branch, "keptSetBy": kept_set_by,
                    "at": (!w.image.places.is_empty()).then_some(&w.image.places),
                    "rollout": w.rollout.as_ref().map(|r| serde_json::json!({"outcome": r.outcome, "at": r.at.and_then(at)})),
                    "checks": (w.checks > 1).then_some(w.checks),
                    "verification": w.verifying_since.and_then(at).map(|live| serde_json::json!({"live": live}))})
            })
            .collect()
    }

    /// The write made at `time` as far as this record still knows it: this record, or the
    /// images whose last write, carried forward under `earlier`, was made then (a later
    /// write of other images does not end their rollout). `None`: every image of that write
    /// has been written again since.
    pub fn write_at(&self, time: OffsetDateTime) -> Option<Self> {
        if self.time == time {
            return Some(self.clone());
        }
        let writes: Vec<&ImageWrite> = self.earlier.iter().filter(|w| w.time == time).collect();
        let first = writes.first()?;
        Some(Self {
            text: self.text.clone(),
            json: self.json.clone(),
            time,
            event_id: String::new(),
            images: writes.iter().map(|w| w.image.clone()).collect(),
            commit: first.commit.clone(),
            pull_request: first.pull_request,
            branch: first.branch.clone(),
            rollout: first.rollout.clone(),
            checks: first.checks,
            verifying_since: first.verifying_since,
            earlier: Vec::new(),
            carried: true,
        })
    }

    /// This record as the values its write replaced: each image moved, at what it was
    /// before (those without one left out).
    pub fn replaced(&self) -> Self {
        let mut replaced = self.clone();
        replaced.images = self
            .images
            .iter()
            .filter_map(|i| {
                Some(AuditedImage {
                    to: i.from.clone()?,
                    from: None,
                    places: Vec::new(),
                    ..i.clone()
                })
            })
            .collect();
        replaced
    }

    /// The whole record's JSON with `field` set on this write: on the record itself, or, for
    /// an earlier write, on each of its entries under `earlier`.
    pub fn with(&self, field: &str, value: Value) -> Value {
        self.with_fields(&[(field, value)])
    }

    /// The whole record's JSON with each of `fields` set on this write, as [`Self::with`].
    pub fn with_fields(&self, fields: &[(&str, Value)]) -> Value {
        let mut json = self.json.clone();
        if !self.carried {
            for (field, value) in fields {
                json[*field] = value.clone();
            }
            return json;
        }
        for entry in json["earlier"].as_array_mut().into_iter().flatten() {
            if rfc3339_at(&entry["time"]) == Some(self.time) {
                for (field, value) in fields {
                    entry[*field] = value.clone();
                }
            }
        }
        json
    }

    /// The write's time as it is written in the record, which a rollout check names.
    pub fn time_text(&self) -> String {
        self.json["time"].as_str().unwrap_or_default().to_string()
    }

    /// Whether the record names `image` moved to `value`.
    pub fn moved(&self, image: &str, value: &str) -> bool {
        self.images
            .iter()
            .any(|i| i.image == image && i.to == value)
    }
}

/// An RFC 3339 time held in a JSON string.
pub fn rfc3339_at(value: &Value) -> Option<OffsetDateTime> {
    value
        .as_str()
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn app_with(record: &str) -> Value {
        json!({"metadata": {"annotations": {AUDIT_ANNOTATION: record}}})
    }

    #[test]
    fn a_patch_record_reads_with_its_images_and_push_times() {
        let record = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e-1", "images": [
            {"alias": "app", "image": "1.dkr.ecr.r.amazonaws.com/web", "from": "1.0.0",
             "to": "1.1.0", "pushed": "2026-12-03T09:59:30Z"}]})
        .to_string();
        let read = AuditRecord::of(&app_with(&record)).unwrap();
        assert_eq!(read.time, datetime!(2026-12-03 10:00:00 UTC));
        assert_eq!(read.time_text(), "2026-12-03T10:00:00Z");
        assert_eq!(read.text, record);
        assert_eq!(
            read.images[0].pushed,
            Some(datetime!(2026-12-03 9:59:30 UTC))
        );
        assert!(read.moved("1.dkr.ecr.r.amazonaws.com/web", "1.1.0"));
        assert!(!read.moved("1.dkr.ecr.r.amazonaws.com/web", "1.0.0"));
        assert_eq!(
            (read.commit, read.pull_request, read.rollout),
            (None, false, None)
        );
    }

    #[test]
    fn a_place_holds_while_its_entry_reads_as_written_and_carries_into_another_source() {
        let place = |list: &str, name: &str, value: &str| Place {
            list: list.into(),
            name: name.into(),
            value: value.into(),
        };
        let helm = "/spec/source/helm/parameters";
        let kustomize = "/spec/sources/1/kustomize/images";
        let app = json!({"spec": {"source": {"helm": {"parameters": [
                {"name": "image.tag", "value": "v2"}, {"name": "image.tag", "value": "v2"},
                {"name": "other", "value": "x"}]}},
            "sources": [{}, {"kustomize": {"images": ["sidecar:1", "web=r/web:v2"]}}]}});
        let cases = [
            (
                "every parameter of the name reads as written",
                place(helm, "image.tag", "v2"),
                true,
            ),
            (
                "a parameter set back",
                place(helm, "image.tag", "v3"),
                false,
            ),
            (
                "a parameter no longer there",
                place(helm, "image.name", "r/web"),
                false,
            ),
            (
                "a Kustomize entry of the name as written",
                place(kustomize, "web", "web=r/web:v2"),
                true,
            ),
            (
                "a Kustomize entry edited",
                place(kustomize, "web", "web=r/web:v3"),
                false,
            ),
            (
                "a list gone",
                place("/spec/source/plugin/env", "TAG", "v2"),
                false,
            ),
        ];
        for (case, place, holds) in cases {
            assert_eq!(place.holds(&app), holds, "{case}");
        }
        let mut into = app.clone();
        let from = json!({"spec": {"source": {"helm": {"parameters": [{"name": "image.tag", "value": "v1"}]}}}});
        place(helm, "image.tag", "v2").take_from(&from, &mut into);
        assert_eq!(
            into["spec"]["source"]["helm"]["parameters"][1]["value"],
            "v1"
        );
        assert_eq!(
            into["spec"]["source"]["helm"]["parameters"][2]["value"],
            "x"
        );
    }

    #[test]
    fn a_git_record_names_its_commit_and_a_recorded_outcome_reads_back() {
        let record = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e", "images": [],
            "git": {"commit": "abc", "pullRequest": null},
            "rollout": {"outcome": "failed", "at": "2026-12-03T10:05:00Z"}})
        .to_string();
        let read = AuditRecord::of(&app_with(&record)).unwrap();
        assert_eq!(read.commit.as_deref(), Some("abc"));
        assert!(!read.pull_request);
        let outcome = read.rollout.unwrap();
        assert_eq!(outcome.outcome, "failed");
        assert_eq!(outcome.at, Some(datetime!(2026-12-03 10:05:00 UTC)));
    }

    #[test]
    fn each_images_last_write_is_carried_forward_by_writes_of_other_images() {
        let first = json!({"time": "2026-12-01T10:00:00Z", "eventId": "e1", "images": [
            {"alias": "web", "image": "r/web", "from": "1", "to": "2"},
            {"alias": "api", "image": "r/api", "from": "7", "to": "8"}],
            "git": {"commit": "c1", "pullRequest": null}});
        let first = AuditRecord::from_json(&first.to_string(), first).unwrap();
        // A write of `api` alone carries `web`'s, with its own time and commit.
        let carried = first.carried_forward(&["r/api".to_string()], None);
        assert_eq!(carried.len(), 1);
        let second = json!({"time": "2026-12-02T10:00:00Z", "eventId": "e2",
            "images": [{"alias": "api", "image": "r/api", "from": "8", "to": "9"}],
            "earlier": carried});
        let second = AuditRecord::from_json(&second.to_string(), second).unwrap();
        let web = second.last_write_of("r/web").unwrap();
        assert_eq!(
            (web.image.to.as_str(), web.time, web.commit.as_deref()),
            ("2", datetime!(2026-12-01 10:00 UTC), Some("c1"))
        );
        let api = second.last_write_of("r/api").unwrap();
        assert_eq!((api.image.to.as_str(), api.time), ("9", second.time));
        assert_eq!(second.last_write_of("r/other"), None);
        // A write of `web` drops its carried entry and carries `api`'s.
        let third = second.carried_forward(&["r/web".to_string()], None);
        assert_eq!(third.len(), 1);
        assert_eq!(third[0]["image"], "r/api");
        assert_eq!(third[0]["to"], "9");
    }

    #[test]
    fn what_is_not_a_record_of_ours_reads_as_none() {
        for text in ["", "not json", "{}", r#"{"time":"yesterday"}"#, "[1]"] {
            assert_eq!(AuditRecord::of(&app_with(text)), None, "{text}");
        }
        assert_eq!(AuditRecord::of(&json!({"metadata": {}})), None);
    }
}
