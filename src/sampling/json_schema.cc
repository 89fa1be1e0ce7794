#include "sampling/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"

namespace ember::grammar {

namespace {

using json = nlohmann::ordered_json;

// Integral parts have at most 16 digits, as in llama.cpp (doubles hold them exactly).
constexpr int64_t kIntLimit = 9999999999999999;

const char* const kSchemaSpace = R"(| " " | "\n" [ \t]{0,20})";
const char* const kSchemaChar =
    R"([^"\\\x7F\x00-\x1F\uD800-\uDFFF] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-C] hex hex hex | [dD] [0-7] hex hex | [eEfF] hex hex hex)))";

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else out += ch;
  }
  return out + "\"";
}

std::string class_char(char32_t c) {
  char buf[16];
  if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
  else std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(c));
  return buf;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// Decimal digit strings a..b of the same length, as a GBNF expression.
std::string same_length_range(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  const size_t rest = a.size() - 1;
  const auto tail = [&](const std::string& e) { return e.empty() ? std::string() : " " + e; };
  const auto digits = [&](size_t n) { return n == 0 ? std::string() : " [0-9]{" + std::to_string(n) + "}"; };
  if (a[0] == b[0]) return std::string("[") + a[0] + "]" + tail(same_length_range(a.substr(1), b.substr(1)));
  if (a.substr(1) == std::string(rest, '0') && b.substr(1) == std::string(rest, '9'))
    return std::string("[") + a[0] + "-" + b[0] + "]" + digits(rest);
  std::vector<std::string> alts;
  alts.push_back(std::string("[") + a[0] + "]" + tail(same_length_range(a.substr(1), std::string(rest, '9'))));
  if (a[0] + 1 <= b[0] - 1)
    alts.push_back(std::string("[") + static_cast<char>(a[0] + 1) + "-" + static_cast<char>(b[0] - 1) + "]" + digits(rest));
  alts.push_back(std::string("[") + b[0] + "]" + tail(same_length_range(std::string(rest, '0'), b.substr(1))));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Non-negative integers a..b without leading zeros.
std::string unsigned_range(int64_t a, int64_t b) {
  std::vector<std::string> alts;
  int64_t low = 0, high = 9;
  for (int len = 1; len <= 17 && low <= b; ++len) {
    const int64_t x = std::max(a, low), y = std::min(b, high);
    if (x <= y) alts.push_back(same_length_range(std::to_string(x), std::to_string(y)));
    low = high + 1;
    high = high * 10 + 9;
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Integers lo..hi, as JSON writes them.
std::string integer_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + unsigned_range(std::max<int64_t>(1, hi < 0 ? -hi : 1), -lo));
  if (hi >= 0) alts.push_back(unsigned_range(std::max<int64_t>(lo, 0), hi));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class SchemaConverter {
 public:
  // The expression of one value matching `schema` (its "#..." references resolve within it). Several
  // schemas may go through one converter: their rules share names and bodies without clashing.
  std::string value(const json& schema) {
    root_ = &schema;
    refs_.clear();
    return visit(schema, "");
  }
  std::string any_object() { return primitive("object"); }
  // The grammar text: root, then every rule made so far.
  std::string grammar(const std::string& root_body) const { return "root ::= " + root_body + "\n" + rules_text(); }

 private:
  std::string rules_text() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  [[noreturn]] static void unsupported(const std::string& what, const std::string& ptr) {
    fail("json schema", "unsupported keyword \"" + what + "\" at " + (ptr.empty() ? "/" : ptr));
  }
  [[noreturn]] static void bad(const std::string& what, const std::string& ptr) {
    fail("json schema", what + " at " + (ptr.empty() ? "/" : ptr));
  }

  // A named rule for `body` (one rule per distinct body).
  std::string add_rule(const std::string& hint, const std::string& body) {
    if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = unique_name(hint);
    rules_[name] = body;
    by_body_[body] = name;
    return name;
  }

  std::string unique_name(const std::string& hint) const {
    std::string name;
    for (const char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) name = "r" + name;
    if (name.size() > 40) name.resize(40);
    std::string unique = name;
    for (int i = 2; rules_.count(unique) || unique == "root"; ++i) unique = name + std::to_string(i);
    return unique;
  }

  std::string primitive(const std::string& name) {
    if (rules_.count(name)) return name;
    std::string body;
    if (name == "space") body = kSchemaSpace;
    else if (name == "hex") body = "[0-9a-fA-F]";
    else if (name == "char") body = std::string(kSchemaChar), primitive("hex");
    else if (name == "string") body = "\"\\\"\" " + primitive("char") + "* \"\\\"\" " + primitive("space");
    else if (name == "integral-part") body = "[0] | [1-9] [0-9]{0,15}";
    else if (name == "decimal-part") body = "[0-9]{1,16}";
    else if (name == "number")
      body = "(\"-\"? " + primitive("integral-part") + ") (\".\" " + primitive("decimal-part") + ")? ([eE] [-+]? " +
             primitive("integral-part") + ")? " + primitive("space");
    else if (name == "integer") body = "(\"-\"? " + primitive("integral-part") + ") " + primitive("space");
    else if (name == "boolean") body = "(\"true\" | \"false\") " + primitive("space");
    else if (name == "null") body = "\"null\" " + primitive("space");
    else if (name == "value") {
      rules_[name] = "";  // reserved: object and array refer back to it
      body = primitive("object") + " | " + primitive("array") + " | " + primitive("string") + " | " +
             primitive("number") + " | " + primitive("boolean") + " | " + primitive("null");
    } else if (name == "object") {
      rules_[name] = "";
      const std::string kv = primitive("string") + " \":\" " + primitive("space") + " " + primitive("value");
      body = "\"{\" " + primitive("space") + " (" + kv + " (\",\" " + primitive("space") + " " + kv + ")*)? \"}\" " +
             primitive("space");
    } else if (name == "array") {
      rules_[name] = "";
      body = "\"[\" " + primitive("space") + " (" + primitive("value") + " (\",\" " + primitive("space") + " " +
             primitive("value") + ")*)? \"]\" " + primitive("space");
    } else if (name == "date") {
      body = "[0-9]{4} \"-\" (\"02\" \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]) | (\"0\" [469] | \"11\") \"-\" "
             "(\"0\" [1-9] | [12] [0-9] | \"30\") | (\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | "
             "\"3\" [01]))";
    } else if (name == "time") {
      body = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] "
             "[0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
    } else if (name == "ipv4") {  // no leading zeros (Python's ipaddress refuses them)
      const std::string octet = "(\"0\" | [1-9] [0-9]? | \"1\" [0-9] [0-9] | \"2\" [0-4] [0-9] | \"25\" [0-5])";
      body = octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet;
    } else if (name == "uuid") {
      body = "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}";
      primitive("hex");
    } else {
      fail("json schema", "internal: no primitive " + name);
    }
    rules_[name] = body;
    return name;
  }

  void check_keywords(const json& s, const std::string& ptr) {
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
        "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf",
        "oneOf", "$ref", "$defs", "definitions",
        // annotations: no effect on validity
        "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated", "readOnly",
        "writeOnly", "strict"};
    for (const auto& [k, v] : s.items())
      if (!kKnown.count(k)) unsupported(k, ptr + "/" + pointer_token(k));
  }

  static bool constraint_keyword(const std::string& k) {
    static const std::set<std::string> kNotConstraints = {"$defs", "definitions", "title", "description", "$schema",
                                                          "$id", "$comment", "default", "examples", "deprecated",
                                                          "readOnly", "writeOnly", "strict"};
    return !kNotConstraints.count(k);
  }

  // Keywords beside `key` that would narrow it (we only express `key` alone).
  static void alone(const json& s, const std::string& key, const std::string& ptr, bool type_ok = false) {
    for (const auto& [k, v] : s.items())
      if (k != key && constraint_keyword(k) && !(type_ok && k == "type"))
        unsupported(k, ptr + "/" + pointer_token(k) + " (beside " + key + ")");
  }

  std::string literal_rule(const json& value) { return gbnf_literal(value.dump()) + " " + primitive("space"); }

  static std::string json_type(const json& v) {
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    if (v.is_number_integer() || v.is_number_unsigned() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
      return "integer";
    return "number";
  }

  std::string visit(const json& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return primitive("value");
      bad("the schema false allows no value", ptr);
    }
    if (!s.is_object()) bad("a schema must be an object or a boolean", ptr);
    check_keywords(s, ptr);
    if (s.contains("$ref")) {
      alone(s, "$ref", ptr);
      return ref(s["$ref"], ptr + "/$ref");
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const auto& x : t) {
          if (!x.is_string()) bad("type must be a string or a list of strings", ptr + "/type");
          types.push_back(x.get<std::string>());
        }
      else bad("type must be a string or a list of strings", ptr + "/type");
      if (types.empty()) bad("an empty type list allows no value", ptr + "/type");
    }
    const auto type_allows = [&](const json& v) {
      if (types.empty()) return true;
      const std::string t = json_type(v);
      for (const auto& x : types)
        if (x == t || (x == "number" && t == "integer")) return true;
      return false;
    };
    if (s.contains("const")) {
      if (!type_allows(s["const"])) bad("const does not have the schema's type", ptr + "/const");
      return add_rule(hint(ptr, "const"), literal_rule(s["const"]));
    }
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) bad("enum must be an array", ptr + "/enum");
      std::string body;
      for (const auto& v : s["enum"])
        if (type_allows(v)) body += (body.empty() ? "" : " | ") + literal_rule(v);
      if (body.empty()) bad("no enum value has the schema's type", ptr + "/enum");
      return add_rule(hint(ptr, "enum"), body);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      alone(s, key, ptr);
      const json& branches = s[key];
      if (!branches.is_array() || branches.empty()) bad(std::string(key) + " must be a non-empty array", ptr + "/" + key);
      if (std::string(key) == "oneOf") check_disjoint(branches, ptr + "/oneOf");
      std::string body;
      for (size_t i = 0; i < branches.size(); ++i)
        if (branches[i] != json(false))  // a false branch adds nothing
          body += (body.empty() ? "" : " | ") + visit(branches[i], ptr + "/" + key + "/" + std::to_string(i));
      if (body.empty()) bad(std::string("every branch of ") + key + " is false: the schema allows no value", ptr);
      return add_rule(hint(ptr, key), body);
    }
    if (types.empty()) types.push_back(inferred_type(s));
    std::string body;
    for (const auto& t : types) body += (body.empty() ? "" : " | ") + typed(s, t, ptr);
    return add_rule(hint(ptr, types.size() == 1 ? types[0] : "value"), body);
  }

  // A schema without "type": the type its keywords constrain (any value if none).
  static std::string inferred_type(const json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return "object";
    for (const char* k : {"items", "minItems", "maxItems"})
      if (s.contains(k)) return "array";
    for (const char* k : {"minLength", "maxLength", "format"})
      if (s.contains(k)) return "string";
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return "number";
    return "any";
  }

  std::string hint(const std::string& ptr, const std::string& what) {
    const size_t slash = ptr.rfind('/');
    const std::string last = slash == std::string::npos ? "" : ptr.substr(slash + 1);
    return last.empty() || std::isdigit(static_cast<unsigned char>(last[0])) ? what : last + "-" + what;
  }

  // The JSON types (or, for const and enum, the values) a oneOf branch can produce; overlapping
  // branches would make a value valid for two of them, which oneOf forbids.
  void check_disjoint(const json& branches, const std::string& ptr) {
    std::vector<std::set<std::string>> kinds;
    for (size_t i = 0; i < branches.size(); ++i) {
      const json* b = &branches[i];
      for (int hops = 0; b->is_object() && b->contains("$ref") && hops < 16; ++hops)
        b = &resolve((*b)["$ref"], ptr + "/" + std::to_string(i));
      std::set<std::string> k;
      if (b->is_object() && (b->contains("const") || b->contains("enum"))) {
        if (b->contains("const")) k.insert("=" + (*b)["const"].dump());
        else if ((*b)["enum"].is_array())
          for (const auto& v : (*b)["enum"]) k.insert("=" + v.dump());
      } else if (b->is_object() && b->contains("type")) {
        const json& t = (*b)["type"];
        for (const auto& x : t.is_array() ? t : json::array({t}))
          if (x.is_string()) k.insert(x.get<std::string>() == "integer" ? "number" : x.get<std::string>());
      } else if (b->is_object() && !b->contains("anyOf") && !b->contains("oneOf") && inferred_type(*b) != "any") {
        k.insert(inferred_type(*b));
      } else {
        unsupported("oneOf", ptr + " (a branch without a type may overlap the others)");
      }
      kinds.push_back(std::move(k));
    }
    const auto type_of = [](const std::string& kind) {
      if (kind[0] != '=') return kind;
      const std::string t = json_type(json::parse(kind.substr(1)));
      return t == "integer" ? std::string("number") : t;
    };
    for (size_t i = 0; i < kinds.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        for (const auto& a : kinds[i])
          for (const auto& b : kinds[j]) {
            const bool clash = a == b || (a[0] == '=' && b[0] != '=' && type_of(a) == b) ||
                               (b[0] == '=' && a[0] != '=' && type_of(b) == a);
            if (clash) unsupported("oneOf", ptr + " (branches " + std::to_string(j) + " and " + std::to_string(i) + " may overlap)");
          }
  }

  const json& resolve(const json& target, const std::string& ptr) {
    if (!target.is_string()) bad("$ref must be a string", ptr);
    const std::string r = target.get<std::string>();
    if (r.empty() || r[0] != '#') unsupported("$ref", ptr + " (only local references \"#...\" are supported, got \"" + r + "\")");
    try {
      return root_->at(json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      bad("$ref \"" + r + "\" points at nothing", ptr);
    }
  }

  std::string ref(const json& target, const std::string& ptr) {
    const json& s = resolve(target, ptr);
    const std::string r = target.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    const std::string name = unique_name(hint(r, "ref"));
    rules_[name] = "";  // reserved: a recursive schema refers to it
    refs_[r] = name;
    rules_[name] = visit(s, r.substr(1));
    return name;
  }

  std::string typed(const json& s, const std::string& type, const std::string& ptr) {
    if (type == "any") return primitive("value");
    if (type == "object") return object(s, ptr);
    if (type == "json_object") return primitive("object");  // OpenAI's response_format: any JSON object
    if (type == "array") return array(s, ptr);
    if (type == "string") return string(s, ptr);
    if (type == "integer" || type == "number") return number(s, type == "integer", ptr);
    if (type == "boolean") return primitive("boolean");
    if (type == "null") return primitive("null");
    bad("unknown type \"" + type + "\"", ptr + "/type");
  }

  static int64_t count(const json& s, const char* key, const std::string& ptr) {
    const json& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>())
      bad(std::string(key) + " must be a non-negative integer", ptr + "/" + key);
    if (v.get<double>() > 100000) unsupported(key, ptr + "/" + key + " (above 100000)");
    return static_cast<int64_t>(v.get<double>());
  }

  // `unit` repeated lo..hi times (hi < 0: no limit), separated by `sep`.
  static std::string repeated(const std::string& unit, const std::string& sep, int64_t lo, int64_t hi) {
    if (hi == 0) return "";
    const std::string more = "(" + sep + " " + unit + ")";
    std::string rest;
    const int64_t first_lo = std::max<int64_t>(lo - 1, 0);
    if (hi < 0) rest = more + "{" + std::to_string(first_lo) + ",}";
    else rest = more + "{" + std::to_string(first_lo) + "," + std::to_string(hi - 1) + "}";
    const std::string seq = unit + " " + rest;
    return lo == 0 ? "(" + seq + ")?" : seq;
  }

  std::string array(const json& s, const std::string& ptr) {
    std::string item = primitive("value");
    const int64_t lo = s.contains("minItems") ? count(s, "minItems", ptr) : 0;
    int64_t hi = s.contains("maxItems") ? count(s, "maxItems", ptr) : -1;
    if (s.contains("items")) {
      if (s["items"].is_array()) unsupported("items", ptr + "/items (a list of schemas)");
      if (s["items"] == json(false)) hi = 0;  // no item is valid: only the empty array
      else item = visit(s["items"], ptr + "/items");
    }
    if (hi >= 0 && hi < lo) bad("maxItems is below minItems", ptr);
    const std::string sp = primitive("space");
    return "\"[\" " + sp + " " + repeated(item, "\",\" " + sp, lo, hi) + " \"]\" " + sp;
  }

  std::string string(const json& s, const std::string& ptr) {
    const std::string sp = primitive("space");
    if (s.contains("format")) {
      const json& f = s["format"];
      const std::string fmt = f.is_string() ? f.get<std::string>() : "";
      std::string inner;
      if (fmt == "date") inner = primitive("date");
      else if (fmt == "time") inner = primitive("time");
      else if (fmt == "date-time") inner = primitive("date") + " \"T\" " + primitive("time");
      else if (fmt == "uuid") inner = primitive("uuid");
      else if (fmt == "ipv4") inner = primitive("ipv4");
      else unsupported("format", ptr + "/format (\"" + fmt + "\")");
      if (s.contains("minLength") || s.contains("maxLength")) unsupported("minLength", ptr + " (beside format)");
      return "\"\\\"\" " + inner + " \"\\\"\" " + sp;
    }
    const int64_t lo = s.contains("minLength") ? count(s, "minLength", ptr) : 0;
    const int64_t hi = s.contains("maxLength") ? count(s, "maxLength", ptr) : -1;
    if (hi >= 0 && hi < lo) bad("maxLength is below minLength", ptr);
    if (lo == 0 && hi < 0) return primitive("string");
    const std::string reps = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return "\"\\\"\" " + primitive("char") + reps + " \"\\\"\" " + sp;
  }

  std::string number(const json& s, bool integer, const std::string& ptr) {
    double lo = -static_cast<double>(kIntLimit), hi = static_cast<double>(kIntLimit);
    bool lo_ex = false, hi_ex = false, bounded = false;
    const auto bound = [&](const char* key, double& v, bool& ex, bool exclusive, bool upper) {
      if (!s.contains(key)) return;
      const json& b = s[key];
      if (b.is_boolean()) {  // draft 4: exclusiveMinimum: true qualifies minimum
        if (b.get<bool>()) (upper ? hi_ex : lo_ex) = true;
        return;
      }
      if (!b.is_number()) bad(std::string(key) + " must be a number", ptr + "/" + key);
      const double x = b.get<double>();
      if (upper ? x <= v : x >= v) v = x, ex = exclusive;
      bounded = true;
    };
    bound("minimum", lo, lo_ex, false, false);
    bound("exclusiveMinimum", lo, lo_ex, true, false);
    bound("maximum", hi, hi_ex, false, true);
    bound("exclusiveMaximum", hi, hi_ex, true, true);
    if (!bounded) return primitive(integer ? "integer" : "number");
    const double lim = static_cast<double>(kIntLimit);
    if (lo < -lim || hi > lim) unsupported(lo < -lim ? "minimum" : "maximum", ptr + " (beyond 16 digits)");
    // The integers inside the bounds; fractions only on integer parts whose whole unit interval fits.
    const int64_t ilo = static_cast<int64_t>(lo_ex ? std::floor(lo) + 1 : std::ceil(lo));
    const int64_t ihi = static_cast<int64_t>(hi_ex ? std::ceil(hi) - 1 : std::floor(hi));
    std::vector<std::string> alts;
    if (ilo <= ihi) alts.push_back(integer_range(ilo, ihi));
    if (!integer) {
      // I.f lies in [I, I+1) and -I.f in (-(I+1), -I]: an integer part whose whole interval fits the
      // bounds takes any fraction; one on an exclusive bound needs a fraction that is not zero.
      const std::string frac = " \".\" " + primitive("decimal-part");
      const std::string nonzero = " \".\" [0-9]{0,15} [1-9]";
      const auto add = [&](const std::string& sign, int64_t a, int64_t b, bool edge_open) {
        if (a > b) return;
        if (edge_open) {
          alts.push_back(sign + unsigned_range(a, a) + nonzero);
          ++a;
        }
        if (a <= b) alts.push_back(sign + unsigned_range(a, b) + frac);
      };
      const int64_t pa = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(lo)));
      add("", pa, static_cast<int64_t>(std::floor(hi)) - 1, lo_ex && static_cast<double>(pa) == lo);
      const int64_t na = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(-hi)));
      add("\"-\" ", na, static_cast<int64_t>(std::floor(-lo)) - 1, hi_ex && -static_cast<double>(na) == hi);
    }
    if (alts.empty()) bad("no number satisfies the bounds", ptr);
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ") " + primitive("space");
  }

  // A JSON string (with its quotes) that is none of `names`.
  std::string key_not_in(const std::vector<std::string>& names) {
    struct Node {
      std::map<char32_t, size_t> kids;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const auto& n : names) {
      size_t at = 0;
      for (size_t pos = 0; pos < n.size();) {
        const char32_t c = utf8::decode(n, pos);
        auto it = trie[at].kids.find(c);
        if (it == trie[at].kids.end()) {
          trie.push_back({});
          it = trie[at].kids.emplace(c, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    const std::string ch = primitive("char");
    // The rest of a key after the trie node `at`.
    std::function<std::string(size_t)> rest = [&](size_t at) {
      std::vector<std::string> alts;
      std::string cls = "[^\"\\\\\\x7F\\x00-\\x1F\\uD800-\\uDFFF";
      for (const auto& [c, kid] : trie[at].kids) {
        std::string lit;
        utf8::append(lit, c);
        alts.push_back(gbnf_literal(lit) + " " + rest(kid));
        cls += class_char(c);
      }
      alts.push_back(cls + "] " + ch + "*");
      if (!trie[at].end) alts.push_back("\"\"");
      std::string out = "(";
      for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
      return out + ")";
    };
    return "\"\\\"\" " + rest(0) + " \"\\\"\" " + primitive("space");
  }

  std::string object(const json& s, const std::string& ptr) {
    const std::string sp = primitive("space");
    std::vector<std::pair<std::string, std::string>> props;  // name, kv rule
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) bad("required must be an array", ptr + "/required");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) bad("required must list strings", ptr + "/required");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::string> names;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) bad("properties must be an object", ptr + "/properties");
      for (const auto& [name, sub] : s["properties"].items()) {
        names.push_back(name);
        if (sub == json(false)) {  // the key must not appear
          if (required.count(name)) bad("required property \"" + name + "\" has the schema false: it allows no value", ptr);
          continue;
        }
        const std::string value = visit(sub, ptr + "/properties/" + pointer_token(name));
        props.push_back({name, add_rule(hint(ptr + "/" + name, "kv"), literal_rule(json(name)) + " \":\" " + sp + " " + value)});
      }
    }
    for (const auto& r : required)  // required but not described: any value
      if (std::find(names.begin(), names.end(), r) == names.end()) {
        props.push_back({r, add_rule(hint(ptr + "/" + r, "kv"), literal_rule(json(r)) + " \":\" " + sp + " " + primitive("value"))});
        names.push_back(r);
      }
    std::vector<std::string> req, opt;
    for (const auto& [name, kv] : props) (required.count(name) ? req : opt).push_back(kv);
    bool extra = false;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        extra = a.get<bool>();
        if (extra) opt.push_back(add_rule(hint(ptr, "additional-kv"), key_not_in(names) + " \":\" " + sp + " " + primitive("value")));
      } else {
        const std::string value = visit(a, ptr + "/additionalProperties");
        opt.push_back(add_rule(hint(ptr, "additional-kv"), key_not_in(names) + " \":\" " + sp + " " + value));
        extra = true;
      }
    }
    const std::string comma = "\",\" " + sp;
    std::string body = "\"{\" " + sp;
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " " + comma + " " : " ") + req[i];
    if (!opt.empty()) {
      // Each optional key at most once, in order; the extra keys (last) any number of times.
      const size_t n = opt.size();
      std::vector<std::string> after(n + 1);  // after[i]: the optional keys from i on, each after a comma
      for (size_t i = n; i-- > 0;) {
        const bool star = extra && i == n - 1;
        std::string tail = "(" + comma + " " + opt[i] + ")" + (star ? "*" : "?");
        if (!after[i + 1].empty()) tail += " " + after[i + 1];
        after[i] = add_rule(hint(ptr, "rest"), tail);
      }
      std::string first;  // the first optional key written is opt[i]
      for (size_t i = 0; i < n; ++i) {
        const bool star = extra && i == n - 1;
        std::string alt = opt[i] + (star ? " (" + comma + " " + opt[i] + ")*" : "");
        if (i + 1 < n) alt += " " + after[i + 1];
        first += (i ? " | " : "") + alt;
      }
      body += req.empty() ? " (" + first + ")?" : " (" + comma + " (" + first + "))?";
    }
    return body + " \"}\" " + sp;
  }

  const json* root_ = nullptr;  // the schema being converted (references resolve in it)
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  SchemaConverter c;
  return c.grammar(c.value(schema));
}

std::string json_object_gbnf() {
  SchemaConverter c;
  return c.grammar(c.any_object());
}

std::string framed_schemas_to_gbnf(const std::vector<FramedSchema>& shapes) {
  if (shapes.empty()) throw Error("framed_schemas_to_gbnf: no shape");
  auto lit = [](const std::string& t) { return t.empty() ? std::string() : gbnf_literal(t) + " "; };
  SchemaConverter c;
  std::string alternatives;
  for (const FramedSchema& shape : shapes)
    alternatives += (alternatives.empty() ? "" : " | ") + ("(" + lit(shape.prefix) + "(" + c.value(shape.schema) + ") " +
                                                           lit(shape.suffix) + ")");
  return c.grammar(alternatives);
}

}  // namespace ember::grammar
