// See json_bounded.h.
#include "engine/core/json_bounded.h"

#include <fmt/format.h>

namespace tfw {

namespace {

using json = nlohmann::json;
using Dom = nlohmann::detail::json_sax_dom_parser<json>;

// nlohmann's DOM builder with a count in front of each event; sax_parse calls these (it is a
// template on the handler's type), and returning false stops the parse at once.
class BoundedDom : public Dom {
 public:
  BoundedDom(json& root, const JsonBounds& bounds, std::string& why) : Dom(root, false), bounds_(bounds), why_(why) {}

  bool null() { return value() && Dom::null(); }
  bool boolean(bool v) { return value() && Dom::boolean(v); }
  bool number_integer(json::number_integer_t v) { return value() && Dom::number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value() && Dom::number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return value() && Dom::number_float(v, s); }
  bool string(json::string_t& v) { return value() && Dom::string(v); }
  bool binary(json::binary_t& v) { return value() && Dom::binary(v); }
  bool key(json::string_t& k) { return value() && Dom::key(k); }
  bool start_object(std::size_t n) { return container() && Dom::start_object(n); }
  bool start_array(std::size_t n) { return container() && Dom::start_array(n); }
  bool end_object() {
    --depth_;
    return Dom::end_object();
  }
  bool end_array() {
    --depth_;
    return Dom::end_array();
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    if (why_.empty()) why_ = fmt::format("is not valid JSON ({})", e.what());
    return Dom::parse_error(position, token, e);
  }

 private:
  bool value() {
    if (++values_ <= bounds_.values) return true;
    why_ = fmt::format("holds more than {} values", bounds_.values);
    return false;
  }
  bool container() {
    if (!value()) return false;
    if (++containers_ > bounds_.containers) {
      why_ = fmt::format("holds more than {} objects and arrays", bounds_.containers);
      return false;
    }
    if (++depth_ > bounds_.depth) {
      why_ = fmt::format("nests deeper than {} levels", bounds_.depth);
      return false;
    }
    return true;
  }

  const JsonBounds& bounds_;
  std::string& why_;
  std::size_t values_ = 0, containers_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string json_parse_bounded(std::string_view text, const JsonBounds& bounds, json& out) {
  std::string why;
  out = json();
  {
    BoundedDom dom(out, bounds, why);
    const bool ok = json::sax_parse(text.begin(), text.end(), &dom, json::input_format_t::json, /*strict=*/true);
    if (!ok && why.empty()) why = "is not valid JSON";
  }
  if (!why.empty()) out = json();
  return why;
}

}  // namespace tfw
