//! goose-yaml FILE: what Goose reads from its config.yaml, as JSON on stdout.
//!
//! Goose (block/goose, crates/goose/src/config/base) reads the whole file
//! with `std::fs::read_to_string`, parses it with `serde_yaml::from_str`
//! into a `Mapping`, and on a parse error warns "is corrupt ... Starting
//! fresh" and writes its next setting over an empty mapping: the file's
//! other contents are lost. It then takes `extensions` as a `Mapping` and
//! each entry whose key is a string and whose value deserializes as an
//! extension entry; it skips the others with a warning. This program does
//! the same steps with the same serde_yaml, through its own minimal model
//! of the entry (stdio fully; the other types only as far as the type tag).
//!
//! Exit 0: parsed (each entry says whether Goose would take it).
//! Exit 1: Goose could not read or parse the file; the message is serde_yaml's.
//! Exit 2: usage.
use serde::Deserialize;
use serde_json::{json, Value as Json};
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::process::ExitCode;

/// One entry of `extensions`: `enabled` beside the type-tagged fields, as
/// Goose's ExtensionEntry flattens its ExtensionConfig.
#[derive(Deserialize)]
struct Entry {
    enabled: bool,
    #[serde(flatten)]
    ext: Ext,
}

/// The fields Goose requires of a stdio extension, with its defaults: `args`
/// has none (an entry without it is skipped), `description` may be null.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Ext {
    #[serde(rename = "stdio")]
    Stdio {
        name: String,
        #[serde(default, deserialize_with = "null_as_empty")]
        #[allow(dead_code)]
        description: String,
        cmd: String,
        args: Vec<String>,
        #[serde(default)]
        envs: BTreeMap<String, String>,
        #[serde(default)]
        env_keys: Vec<String>,
        timeout: Option<u64>,
    },
    /// builtin, platform, streamable_http, ...: not modelled here.
    #[serde(other)]
    Other,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn entry(key: &Value, v: &Value) -> Json {
    let raw = serde_json::to_value(v).unwrap_or(Json::Null);
    let ty = v.get("type").and_then(Value::as_str);
    let mut out = json!({"key": key_text(key), "type": ty, "raw": raw});
    if key.as_str().is_none() {
        out["skipped"] = json!("the key is not a string");
        return out;
    }
    match serde_yaml::from_value::<Entry>(v.clone()) {
        Err(e) => out["skipped"] = json!(e.to_string()),
        Ok(Entry { enabled, ext: Ext::Other }) => out["enabled"] = json!(enabled),
        Ok(Entry { enabled, ext: Ext::Stdio { name, cmd, args, envs, env_keys, timeout, .. } }) => {
            let fields = json!({"enabled": enabled, "name": name, "cmd": cmd, "args": args,
                "envs": envs, "env_keys": env_keys, "timeout": timeout});
            for (k, f) in fields.as_object().into_iter().flatten() {
                out[k] = f.clone();
            }
        }
    }
    out
}

/// A key as text: a string as it is, anything else as serde_yaml writes it.
fn key_text(k: &Value) -> String {
    match k.as_str() {
        Some(s) => s.to_string(),
        None => serde_yaml::to_string(k).unwrap_or_default().trim_end().to_string(),
    }
}

fn read(path: &str) -> Result<Json, (String, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| ("read".into(), e.to_string()))?;
    let top: Mapping = serde_yaml::from_str(&text).map_err(|e| ("parse".into(), e.to_string()))?;
    let mut out = json!({"parsed": true, "extensions": []});
    match top.get("extensions").map(|v| serde_yaml::from_value::<Mapping>(v.clone())) {
        None => {}
        Some(Err(e)) => out["extensions_error"] = json!(e.to_string()),
        Some(Ok(m)) => out["extensions"] = m.iter().map(|(k, v)| entry(k, v)).collect(),
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: goose-yaml CONFIG.yaml");
        return ExitCode::from(2);
    }
    match read(&args[1]) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err((stage, msg)) => {
            println!("{}", json!({"parsed": false, "stage": stage, "error": msg}));
            eprintln!("goose-yaml: {}: {stage}: {msg}", args[1]);
            ExitCode::from(1)
        }
    }
}
