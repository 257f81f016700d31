"""Question/answer templates as data (YAML); the loader is ``autolabel.qa.templates``.

Every ``*.yaml`` file here except ``vocabulary.yaml`` holds the question types of one category;
``vocabulary.yaml`` holds the words shared by all (camera names, class nouns, list joining). The
file format and the ``qa.jsonl`` record schema are described in ``SCHEMA.md``.
"""

from pathlib import Path

#: The folder of the packaged templates.
TEMPLATE_DIR = Path(__file__).parent
