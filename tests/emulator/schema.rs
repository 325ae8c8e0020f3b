//! A small structural checker for the subset of OpenAPI 3 / JSON Schema the emulator's document
//! uses: `$ref`, `type`, `required`, `properties`, `items`, `enum`, `nullable`, `oneOf`,
//! `allOf`, and the string `format`s `date` (`YYYY-MM-DD`) and `date-time` (RFC 3339).

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::Value;

/// Checks answers against an OpenAPI document, remembering which operations it saw.
pub struct Checker {
    doc: Value,
    /// `METHOD /template` of every operation an answer was checked for.
    covered: RefCell<BTreeSet<String>>,
}

impl Checker {
    pub fn new(doc: Value) -> Self {
        assert!(
            doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
            "an OpenAPI 3 document"
        );
        Checker {
            doc,
            covered: RefCell::default(),
        }
    }

    /// Operations of the document no answer was checked for.
    pub fn uncovered(&self) -> Vec<String> {
        let covered = self.covered.borrow();
        let mut missing = Vec::new();
        for (template, item) in self.doc["paths"].as_object().into_iter().flatten() {
            for method in ["get", "put", "post", "delete", "patch"] {
                let name = format!("{} {template}", method.to_ascii_uppercase());
                if !item[method].is_null() && !covered.contains(&name) {
                    missing.push(name);
                }
            }
        }
        missing
    }

    /// The operation for `method` on the template matching `path` must document `status`, and
    /// the body must fit the documented schema.
    pub fn check(&self, method: &str, path: &str, status: u16, body: &Value) -> Result<(), String> {
        let path = path.split('?').next().unwrap_or(path);
        let template = self
            .template(path)
            .ok_or_else(|| format!("no path template matches {path}"))?;
        let operation = &self.doc["paths"][template.as_str()][method.to_ascii_lowercase()];
        if operation.is_null() {
            return Err(format!("{method} is not documented on {template}"));
        }
        self.covered
            .borrow_mut()
            .insert(format!("{} {template}", method.to_ascii_uppercase()));
        let response = self.resolve(&operation["responses"][status.to_string()]);
        if response.is_null() {
            return Err(format!(
                "status {status} is not documented for {method} {template}"
            ));
        }
        let schema = &response["content"]["application/json"]["schema"];
        match (schema.is_null(), body.is_null()) {
            (true, true) => Ok(()),
            (true, false) => Err("a body where the document has none".into()),
            (false, _) => self.validate(body, schema, "body"),
        }
    }

    fn template(&self, path: &str) -> Option<String> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        self.doc["paths"]
            .as_object()?
            .keys()
            .find(|template| {
                let parts: Vec<&str> = template.trim_start_matches('/').split('/').collect();
                parts.len() == segments.len()
                    && parts
                        .iter()
                        .zip(&segments)
                        .all(|(p, s)| p.starts_with('{') || p == s)
            })
            .cloned()
    }

    fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        match value["$ref"].as_str() {
            Some(reference) => {
                let pointer = reference.trim_start_matches('#');
                self.resolve(self.doc.pointer(pointer).unwrap_or(&Value::Null))
            }
            None => value,
        }
    }

    fn validate(&self, value: &Value, schema: &Value, at: &str) -> Result<(), String> {
        let schema = self.resolve(schema);
        if schema.is_null() {
            return Err(format!("{at}: unresolvable schema"));
        }
        if value.is_null() && schema["nullable"] == true {
            return Ok(());
        }
        if let Some(options) = schema["oneOf"].as_array() {
            return if options
                .iter()
                .any(|option| self.validate(value, option, at).is_ok())
            {
                Ok(())
            } else {
                Err(format!("{at}: {value} matches none of oneOf"))
            };
        }
        for part in schema["allOf"].as_array().into_iter().flatten() {
            self.validate(value, part, at)?;
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(value) {
                return Err(format!("{at}: {value} is not in the enum"));
            }
        }
        let fits = match schema["type"].as_str() {
            None => true,
            Some("object") => value.is_object(),
            Some("array") => value.is_array(),
            Some("string") => value.is_string(),
            Some("number") => value.is_number(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("boolean") => value.is_boolean(),
            Some(other) => return Err(format!("{at}: unsupported type {other}")),
        };
        if !fits {
            return Err(format!("{at}: {value} is not of type {}", schema["type"]));
        }
        if let (Some(text), Some(format)) = (value.as_str(), schema["format"].as_str()) {
            let fits = match format {
                "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
                "date-time" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
                _ => true,
            };
            if !fits {
                return Err(format!("{at}: {value} is not a {format}"));
            }
        }
        if let Some(object) = value.as_object() {
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                if !object.contains_key(name) {
                    return Err(format!("{at}: required field {name:?} is missing"));
                }
            }
            if let Some(properties) = schema["properties"].as_object() {
                for (key, property) in properties {
                    if let Some(field) = object.get(key) {
                        self.validate(field, property, &format!("{at}.{key}"))?;
                    }
                }
            }
        }
        if let Some(items) = value.as_array() {
            for (i, item) in items.iter().enumerate() {
                self.validate(item, &schema["items"], &format!("{at}[{i}]"))
                    .or_else(|err| {
                        if schema["items"].is_null() {
                            Ok(())
                        } else {
                            Err(err)
                        }
                    })?;
            }
        }
        Ok(())
    }
}
