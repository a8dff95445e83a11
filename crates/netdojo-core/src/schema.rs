//! Validation of tool arguments against the JSON Schema a tool publishes.
//!
//! The runner checks every call before the environment sees it, so no backend has to repeat
//! the check and every agent gets the same kind of error message. It supports the subset of
//! JSON Schema that tool schemas use: `type` (one or a list), `properties`, `required`,
//! `additionalProperties: false`, `items`, `enum`, `minimum`, `maximum`, `minLength`,
//! `maxLength`, `minItems`, `maxItems`. Unknown keywords are ignored, as the spec says.

use serde_json::Value;

/// Checks `value` against `schema`; the error names the offending path (`answer[2].name`).
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "")
}

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn at(path: &str) -> String {
    if path.is_empty() { "arguments".to_string() } else { format!("`{path}`") }
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(ty) = schema.get("type") {
        let ok = match ty {
            Value::String(t) => type_matches(t, value),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_matches(t, value)),
            _ => true,
        };
        if !ok {
            return Err(format!("{} must be of type {ty}, got {}", at(path), kind(value)));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!("{} must be one of {}, got {value}", at(path), Value::Array(allowed.clone())));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{} must be >= {min}, got {n}", at(path)));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{} must be <= {max}, got {n}", at(path)));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return Err(format!("{} must have at least {min} characters", at(path)));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return Err(format!("{} must have at most {max} characters", at(path)));
        }
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            return Err(format!("{} must have at least {min} items", at(path)));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            return Err(format!("{} must have at most {max} items", at(path)));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(format!("{} is missing the required field `{name}`", at(path)));
                }
            }
        }
        for (name, field) in object {
            let sub = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            match properties.and_then(|p| p.get(name)) {
                Some(field_schema) => check(field_schema, field, &sub)?,
                None => {
                    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                        let known: Vec<&str> =
                            properties.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        return Err(format!(
                            "{} has an unknown field `{name}` (known: {})",
                            at(path),
                            known.join(", ")
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "kind": {"type": "string", "enum": ["EK_PORT", "EK_RACK"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_valid_arguments() {
        assert_eq!(validate(&schema(), &json!({"name": "ju1", "kind": "EK_PORT", "limit": 5})), Ok(()));
    }

    #[test]
    fn names_the_field_at_fault() {
        let cases = [
            (json!({}), "missing the required field `name`"),
            (json!({"name": 3}), "`name` must be of type \"string\", got integer"),
            (json!({"name": "a", "kind": "EK_X"}), "`kind` must be one of"),
            (json!({"name": "a", "limit": 0}), "`limit` must be >= 1"),
            (json!({"name": "a", "limit": 1.5}), "`limit` must be of type \"integer\""),
            (json!({"name": "a", "tags": ["x", 1]}), "`tags[1]` must be of type"),
            (json!({"name": "a", "tags": ["x", "y", "z"]}), "at most 2 items"),
            (json!({"name": "a", "extra": 1}), "unknown field `extra`"),
            (json!({"name": ""}), "at least 1 characters"),
            (json!("text"), "arguments must be of type \"object\", got string"),
        ];
        for (value, expected) in cases {
            let err = validate(&schema(), &value).expect_err(&value.to_string());
            assert!(err.contains(expected), "{value}: {err}");
        }
    }
}
