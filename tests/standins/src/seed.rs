//! Seeding the stand-ins from files: Applications as YAML or JSON (one or many documents a
//! file), and ECR images as a JSON array of `{repository, tag, digest, pushedAt, ...}`.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::StandIns;
use crate::aws::Image;

const BUILTIN_APPLICATION: &str = include_str!("../seed/applications/aws-pipeline-test.yaml");
const BUILTIN_IMAGES: &str = include_str!("../seed/images.json");

/// The seed shipped with the project: the setup the README describes (a Helm-wrapped chart,
/// its Application and date-tagged images).
pub fn load_builtin(standins: &StandIns) -> Result<(), String> {
    // The deployed stack's queues, which `doctor` reads.
    for queue in standins.aws.deployed().queues {
        standins
            .aws
            .create_queue(queue.rsplit(':').next().unwrap_or_default());
    }
    load_applications_text(standins, BUILTIN_APPLICATION, "builtin application")?;
    load_images_text(standins, BUILTIN_IMAGES, "builtin images")
}

/// The YAML and JSON files of a folder, sorted.
fn yaml_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Loads `DIR/applications/*.{yaml,yml,json}`, `DIR/imageupdaters/*` (Image Updater v1.x
/// objects) and `DIR/images.json`, whichever exist.
pub fn load_dir(standins: &StandIns, dir: &Path) -> Result<(), String> {
    let apps = dir.join("applications");
    if apps.is_dir() {
        for file in yaml_files(&apps)? {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            load_applications_text(standins, &text, &file.display().to_string())?;
        }
    }
    let updaters = dir.join("imageupdaters");
    if updaters.is_dir() {
        for file in yaml_files(&updaters)? {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            for document in serde_yaml_ng::Deserializer::from_str(&text) {
                let object =
                    Value::deserialize(document).map_err(|e| format!("{}: {e}", file.display()))?;
                if !object.is_null() {
                    standins
                        .kube
                        .insert_image_updater(object)
                        .map_err(|e| format!("{}: {e}", file.display()))?;
                }
            }
        }
    }
    let images = dir.join("images.json");
    if images.is_file() {
        let text =
            std::fs::read_to_string(&images).map_err(|e| format!("{}: {e}", images.display()))?;
        load_images_text(standins, &text, &images.display().to_string())?;
    }
    Ok(())
}

/// YAML is a superset of JSON, so one reader serves both.
pub fn load_applications_text(standins: &StandIns, text: &str, origin: &str) -> Result<(), String> {
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let app = Value::deserialize(document).map_err(|e| format!("{origin}: {e}"))?;
        if app.is_null() {
            continue;
        }
        standins
            .kube
            .insert(app)
            .map_err(|e| format!("{origin}: {e}"))?;
    }
    Ok(())
}

pub fn load_images_text(standins: &StandIns, text: &str, origin: &str) -> Result<(), String> {
    let images: Vec<Image> = serde_json::from_str(text).map_err(|e| format!("{origin}: {e}"))?;
    for image in images {
        standins.aws.push(image);
    }
    Ok(())
}
