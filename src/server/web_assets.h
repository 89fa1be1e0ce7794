#pragma once
// Files of the web chat page, compiled into the binary (generated from src/server/web/ at build time).
#include <string_view>

namespace ember::server::web {

std::string_view index_html();
std::string_view favicon_svg();  // the page's icon, also served as /favicon.ico

}  // namespace ember::server::web
