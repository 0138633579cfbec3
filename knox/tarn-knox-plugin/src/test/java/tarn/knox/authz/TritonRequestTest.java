package tarn.knox.authz;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;

class TritonRequestTest {
  @ParameterizedTest(name = "{0} -> {1}")
  @CsvSource(delimiter = '|', value = {
      "/triton/v2                                      | SERVER (server-level)",
      "/triton/v2/                                     | SERVER (server-level)",
      "/triton/v2/health/live                          | SERVER (server-level)",
      "/triton/v2/health/ready                         | SERVER (server-level)",
      "/gateway/tarn/triton/v2/health/ready            | SERVER (server-level)",
      "/triton/v2/models/add_one                       | metadata add_one",
      "/triton/v2/models/add_one/                      | metadata add_one",
      "/triton/v2/models/add_one/versions/1            | metadata add_one",
      "/triton/v2/models/add_one/config                | metadata add_one",
      "/triton/v2/models/add_one/ready                 | metadata add_one",
      "/triton/v2/models/add_one/versions/3/stats      | metadata add_one",
      "/triton/v2/models/add_one/infer                 | infer add_one",
      "/triton/v2/models/add_one/versions/2/infer      | infer add_one",
      "/triton/v2/models/llm/generate_stream           | infer llm",
      "/triton/v2/models/my%20model/infer              | infer my model",
      "/triton/v2/models/v2/infer                      | infer v2",
      "/triton/v2/models/stats                         | metadata *",
      "/triton/v2/repository/index                     | list *",
      "/triton/v2/repository/models/add_one/load       | DENIED (model repository control)",
      "/triton/v2/repository/models/add_one/unload     | DENIED (model repository control)",
      "/triton/v2/systemsharedmemory/status            | DENIED (not a model path)",
      "/triton/v2/cudasharedmemory/status              | DENIED (not a model path)",
      "/triton/v2/trace/setting                        | DENIED (not a model path)",
      "/triton/v2/logging                              | DENIED (not a model path)",
      "/triton/v2/models                               | DENIED (not a model path)",
      "/triton/v2/models/add_one/versions              | DENIED (no version)",
      "/triton/v2/models/add_one/trace/setting         | DENIED (not an inference or metadata path)",
      "/triton/v2/models/add_one/infer/x               | DENIED (not an inference or metadata path)",
      "/triton/v2/models/add_one/load                  | DENIED (not an inference or metadata path)",
      "/triton/v2/health/stats                         | DENIED (unknown health path)",
      "/triton/v2/models/../repository/index           | DENIED (unusual path segment)",
      "/triton/v2/models/%2e%2e/infer                  | DENIED (unusual path segment)",
      "/triton/v2/models/a%2Fb/infer                   | DENIED (unusual path segment)",
      "/triton/v2/models/a;x=1/infer                   | DENIED (unusual path segment)",
      "/triton/v2/models/a%zz/infer                    | DENIED (unusual path segment)",
      "/triton/v2/models/a%0a/infer                    | DENIED (unusual path segment)",
      "/triton/v2//models/a/infer                      | DENIED (unusual path segment)",
      "/triton/metrics                                 | DENIED (not Triton's v2 API)",
      "/triton/v1/models/a                             | DENIED (not Triton's v2 API)",
  })
  void classifies(String path, String expected) {
    assertEquals(expected, TritonRequest.of(path).toString());
  }

  @ParameterizedTest(name = "{0} -> {1}")
  @CsvSource(delimiter = '|', value = {
      "/triton/v1/models                               | list (each model)",
      "/triton/v1/models/                              | list (each model)",
      "/gateway/tarn/triton/v1/models                  | list (each model)",
      "/triton/v1/models/tiny_lm                       | metadata tiny_lm",
      "/triton/v1/models/my%20lm                       | metadata my lm",
      "/triton/v1/chat/completions                     | infer (body's model)",
      "/triton/v1/completions                          | infer (body's model)",
      "/triton/v1/completions/                         | infer (body's model)",
      "/triton/v1                                      | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/metrics                              | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/health                               | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/embeddings                           | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/chat/completions/x                   | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/models/a/b                           | DENIED (not an OpenAI path TARN serves)",
      "/triton/v1/models/%2e%2e                        | DENIED (unusual path segment)",
      "/triton/v1/models/a%2Fb                         | DENIED (unusual path segment)",
      "/triton/v1//completions                         | DENIED (unusual path segment)",
      "/triton/v2/models/a/infer                       | DENIED (not the OpenAI v1 API)",
  })
  void classifiesOpenAI(String path, String expected) {
    assertEquals(expected, TritonRequest.ofOpenAI(path).toString());
  }
}
