// A plugin built for the next plugin API version, in the sample plugin's file name
// (sample_plugins/wrong_version/tfw-bigram.so): the registry must refuse it by the version it
// reports, before it calls anything else of it. Its register function therefore ends the
// process: a registry that called it would fail every test that loads this folder
// (Registry.PluginForAnotherApiVersionIsRefused, Cli.PluginsListsOutOfTreeAndRefusesWrongVersion).
#include <cstdlib>

#include "engine/plugin/plugin_api.h"

TFW_PLUGIN_EXPORT int tfw_plugin_api_version() { return tfw::kPluginApiVersion + 1; }
TFW_PLUGIN_EXPORT void tfw_plugin_register(tfw::PluginRegistrar&) { std::abort(); }
