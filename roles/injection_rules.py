"""The table of injection rules: named patterns, each in English, Spanish, French, German and Chinese.

The patterns run over *folded* text (see `roles.injection.matchable`): lower
case, NFKC, invisible characters removed, look-alike letters from other
scripts replaced by the Latin letter they imitate (UTS #39 confusables),
and accents removed. So they are written in plain lower-case ASCII (and
Chinese), without accents: ``publica``, ``veroffentliche``, ``desormais``.

Each rule looks for a request aimed at an agent, not for a topic: ordinary
prose ("the council approved the budget") is not flagged. A paraphrase
that avoids the obvious words ("set aside the guidance you were given",
"whoever is compiling this summary") has rules of its own.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

HIDDEN_CHARACTERS: Final = "hidden-characters"


@dataclass(frozen=True)
class Rule:
    """One named pattern; `taints_source` marks rules that make the whole file untrusted.

    `alternatives` are the pattern's parts compiled one by one, so that a part
    whose required words are absent from a text need not run on it.
    """

    name: str
    pattern: re.Pattern[str]
    taints_source: bool = True
    alternatives: tuple[re.Pattern[str], ...] = ()


def _rule(name: str, *alternatives: str, taints_source: bool = True) -> Rule:
    joined = "|".join(f"(?:{a})" for a in alternatives)
    parts = tuple(re.compile(a, re.IGNORECASE | re.VERBOSE) for a in alternatives)
    return Rule(name, re.compile(joined, re.IGNORECASE | re.VERBOSE), taints_source, parts)


_AGENT = r"(?:ai|a\.i\.|assistant|llm|chatbot|language\s+model|(?:ai\s+)?agent)s?"
_OLD = r"(?:previous|prior|earlier|above|preceding|original|system|initial)"
_AGENT_ES = r"(?:ia|asistente|agente|modelo(?:\s+de\s+lenguaje)?|chatbot|bot)"
_AGENT_FR = r"(?:ia|assistant|agent|modele(?:\s+de\s+langage)?|chatbot|bot)"
_AGENT_DE = r"(?:ki|assistent(?:en)?|agent(?:en)?|sprachmodell|chatbot|bot)"
_AGENT_ZH = r"(?:人工智能|智能助手|助手|助理|ai|模型|语言模型|語言模型|机器人|機器人|代理)"
_ORDERS_ZH = r"(?:指令|指示|说明|說明|提示|规则|規則|命令|要求)"

RULES: Final[tuple[Rule, ...]] = (
    _rule(
        "ignore-instructions",
        rf"""\b(?:ignore|forget|disregard|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?
            (?:your|my|these|those|all|{_OLD}|the\s+{_OLD})\s+(?:\w+\s+)?
            (?:instructions?|rules|guidelines|directions|directives|prompts?|guardrails?)\b""",
        # paraphrase: set the guidance aside, stop following it, it no longer applies
        rf"""\b(?:set\s+aside|put\s+aside|pay\s+no\s+(?:attention|heed)\s+to|(?:do\s+not|don't|no\s+longer)\s+(?:follow|obey)
            |stop\s+(?:following|obeying)|throw\s+out|discard)\s+
            (?:(?:all\s+|any\s+)?(?:your|the\s+{_OLD}|{_OLD})\s+(?:\w+\s+)?
            (?:instructions?|guidance|directions|directives|rules|guidelines|orders|prompts?)\b
            |what\s+you\s+were\s+(?:told|given|asked))""",
        r"""\b(?:your|the\s+(?:original|initial|system|above)|(?:original|initial|system))\s+(?:\w+\s+)?
            (?:instructions?|guidance|directions|rules|guidelines|orders|prompts?)\s+(?:\w+\s+){0,2}?
            (?:no\s+longer\s+appl(?:y|ies)|(?:is|are)\s+(?:now\s+)?(?:void|cancell?ed|obsolete|superseded|revoked))""",
        r"\byour\s+(?:real|true|actual|new|updated)\s+(?:task|job|instructions?|orders|mission)\b",
        # es
        r"""\b(?:ignora|ignore|ignorad|ignoren|olvida|olvide|olvidad|olviden|omite|descarta)\w*\s+
            (?:todas\s+)?(?:las|tus|sus|estas|esas)\s+(?:\w+\s+){0,2}?(?:instrucciones|indicaciones|ordenes|reglas|directrices)\b""",
        r"\bhaz\s+caso\s+omiso\s+de\b|\bno\s+(?:sigas|obedezcas|hagas\s+caso\s+a)\s+(?:\w+\s+){0,3}?(?:instrucciones|indicaciones|reglas)\b",
        # fr
        r"""\b(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|neglige|negligez)\s+
            (?:toutes\s+|tous\s+)?(?:les|vos|tes|ces)\s+(?:\w+\s+){0,2}?(?:instructions|consignes|directives|regles|ordres)\b""",
        r"\bne\s+(?:tiens|tenez)\s+(?:pas\s+)?compte\s+des?\s+(?:\w+\s+){0,2}?(?:instructions|consignes|regles)\b",
        # de
        r"""\b(?:ignorier\w*|vergiss|vergessen\s+sie|missacht\w*)\s+(?:alle\s+)?
            (?:deine|ihre|die|diese|vorherigen|bisherigen|obigen|vorigen)\s+(?:\w+\s+){0,2}?
            (?:anweisungen|anordnungen|befehle|regeln|vorgaben|richtlinien|instruktionen)\b""",
        # zh
        rf"(?:忽略|无视|無視|忘记|忘記|不要理会|不要理會|忽视|忽視|放弃|放棄).{{0,8}}{_ORDERS_ZH}",
    ),
    _rule(
        "disregard-above",
        r"""\bdisregard\s+(?:all|any|everything)\b
            |\b(?:disregard|ignore|forget)\s+(?:everything\s+|all\s+)?(?:the\s+)?(?:above|preceding)\b""",
        r"\b(?:ignora|olvida)\s+todo\s+lo\s+(?:anterior|de\s+arriba)\b",
        r"\b(?:ignore|ignorez|oublie|oubliez)\s+tout\s+ce\s+qui\s+precede\b",
        r"\b(?:ignoriere|vergiss)\s+alles\s+(?:vorherige|obige|bisherige)\b",
        r"(?:忽略|忘记|忘記)(?:以上|上面|上述|之前)(?:所有|全部)?(?:内容|內容)?",
    ),
    _rule(
        "role-reassignment",
        r"""\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b|\bpretend\s+(?:to\s+be|you\s+are)\b
            |\bact\s+as\s+(?:an?\s+|the\s+)?(?:ai|assistant|chatbot|llm|system|administrator|admin|developer)\b
            |\bnew\s+instructions\s*:""",
        r"\bahora\s+eres\b|\ba\s+partir\s+de\s+ahora,?\s+(?:eres|tu|debes)\b|\bactua\s+como\s+(?:un\s+|una\s+|el\s+)?(?:ia|asistente|administrador|sistema)\b|\bnuevas\s+instrucciones\s*:",
        r"\b(?:tu\s+es|vous\s+etes)\s+maintenant\b|\bdesormais,?\s+(?:tu|vous)\b|\b(?:agis|agissez)\s+(?:comme|en\s+tant\s+que)\s+(?:un\s+|une\s+|l')?(?:ia|assistant|administrateur|systeme)\b|\bnouvelles\s+instructions\s*:",
        r"\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\b|\bab\s+(?:jetzt|sofort)\s+bist\s+du\b|\b(?:handle|agiere)\s+als\s+(?:ki|assistent|administrator|system)\b|\bneue\s+anweisungen\s*:",
        r"你现在是|你現在是|从现在开始你|從現在開始你|扮演(?:一个|一個)?(?:管理员|管理員|系统|系統|助手)|新的?指令\s*[:：]",
    ),
    _rule(
        "as-an-ai",
        r"\bas\s+an?\s+(?:ai|a\.i\.|language\s+model|llm|chatbot|ai\s+assistant)\b",
        r"\bcomo\s+(?:una\s+ia|un\s+modelo\s+de\s+lenguaje|un\s+asistente\s+de\s+ia)\b",
        r"\ben\s+tant\s+qu(?:e\s+|')(?:ia|modele\s+de\s+langage|assistant\s+ia)\b",
        r"\bals\s+(?:ki|sprachmodell|ki-assistent)\b",
        r"作为(?:一个|一個)?(?:人工智能|ai|语言模型|語言模型)|作為(?:一個)?(?:人工智能|ai|語言模型)",
    ),
    _rule(
        "system-prompt",
        r"""\bsystem\s+prompt\b|\bsystem\s+message\b|\bdeveloper\s+(?:message|mode)\b|\bjailbreak
            |<\|?\s*(?:system|im_start|assistant)\b|\[\s*(?:system|inst)\s*\]""",
        r"\b(?:prompt|mensaje|instrucciones)\s+del\s+sistema\b|\bmodo\s+desarrollador\b",
        r"\b(?:invite|message|consignes?)\s+(?:du\s+)?systeme\b|\bmode\s+developpeur\b",
        r"\bsystem-?(?:prompt|nachricht|anweisung)\w*\b|\bentwicklermodus\b",
        r"系统提示|系統提示|系统消息|系統消息|开发者模式|開發者模式|越狱|越獄",
    ),
    _rule(
        "addressed-to-agent",
        rf"""\b(?:note|attention|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?{_AGENT}\b
            |\b(?:dear|hey|hello|hi)\s+{_AGENT}\b
            |\b{_AGENT}\s+(?:reading|processing|summari[sz]ing|parsing)\s+this\b""",
        # paraphrase: whoever or whatever is compiling this, if you are an automated system
        r"""\b(?:whoever|whatever|anyone|anything)\s+(?:is\s+)?(?:compiling|summari[sz]ing|processing|parsing|ingesting|scraping)\s+this\b
            |\bif\s+you\s+are\s+an?\s+(?:ai|automated|bot|model|language|assistant|agent|llm|machine)\b
            |\b(?:automated|automatic)\s+(?:system|reader|tool|agent|summari[sz]er|writer)s?\s+(?:reading|processing|summari[sz]ing|compiling)\b
            |\bwhen\s+you\s+(?:summari[sz]e|write\s+up|draft|compile|rewrite|publish)\s+(?:this|these|the\s+following)\b""",
        rf"\b(?:nota|mensaje|aviso|instrucciones)\s+para\s+(?:el\s+|la\s+|cualquier\s+)?{_AGENT_ES}\b|\b(?:querido|querida|hola|estimado)\s+{_AGENT_ES}\b|\bsi\s+eres\s+(?:una?\s+)?{_AGENT_ES}\b",
        rf"\b(?:note|message|instructions?|avis)\s+(?:pour|a)\s+(?:l'|le\s+|la\s+|tout\s+)?{_AGENT_FR}\b|\b(?:cher|chere|bonjour|salut)\s+{_AGENT_FR}\b|\bsi\s+tu\s+es\s+(?:une?\s+)?{_AGENT_FR}\b",
        rf"\b(?:hinweis|nachricht|anweisung(?:en)?)\s+(?:fur|fuer|an)\s+(?:den\s+|die\s+|das\s+|jeden\s+)?{_AGENT_DE}\b|\b(?:liebe|lieber|hallo|hey)\s+{_AGENT_DE}\b|\bwenn\s+du\s+(?:eine?\s+)?{_AGENT_DE}\s+bist\b",
        rf"(?:致|给|給|写给|寫給|告诉|告訴)(?:所有|任何)?{_AGENT_ZH}|(?:亲爱的|親愛的|你好)\s*{_AGENT_ZH}|如果你是{_AGENT_ZH}",
    ),
    _rule(
        "publish-to",
        r"""\b(?:publish|post|send|upload|push|deploy|forward|submit|exfiltrate)\s+
            (?:(?:this|it|that|these|them|all|everything|the|your|our)\s+)?(?:\w+\s+){0,2}?
            (?:to|at|on)\s+(?:(?:the|this|our|my|a)\s+)?
            (?:webhook|endpoint|url\b|site:|git:|https?:|//)""",
        r"""\b(?:publica|publique|publicar|envia|envie|enviar|sube|suba|subir|manda|mande)\w*\s+(?:\w+\s+){0,3}?
            (?:en|a|al)\s+(?:el\s+|la\s+|este\s+|esta\s+)?(?:webhook|endpoint|url\b|site:|git:|https?:|//)""",
        r"""\b(?:publie|publiez|publier|envoie|envoyez|envoyer|televerse|poste|postez)\w*\s+(?:\w+\s+){0,3}?
            (?:sur|a|vers|au)\s+(?:le\s+|la\s+|l'|ce\s+|cette\s+)?(?:webhook|endpoint|url\b|site:|git:|https?:|//)""",
        r"""\b(?:veroffentlich|veroeffentlich|sende|schicke?|lade|poste)\w*\s+(?:\w+\s+){0,4}?
            (?:an|auf|unter|zu|zum)\s+(?:den\s+|dem\s+|der\s+|die\s+|das\s+|diese[nmrs]?\s+)?(?:webhook|endpunkt|url\b|site:|git:|https?:|//)""",
        r"(?:发布|發布|发送|發送|上传|上傳|推送|提交)(?:到|至|给|給).{0,12}(?:webhook|网址|網址|链接|鏈接|url|https?:|//|site:|git:)",
    ),
    _rule(
        "approval-change",
        r"""\bauto-?approv\w*
            |\bapprove\s+(?:it|this|that|them|(?:the|this)\s+\w+)\s+
             (?:automatically|immediately|now|right\s+away|without)\b
            |\b(?:skip|bypass|override|circumvent)\s+(?:the\s+|any\s+|all\s+)?
             (?:human\s+)?(?:review|approval|reviewer|approver)s?\b
            |\bmark\s+(?:it|this|the\s+\w+)\s+as\s+(?:approved|reviewed|passed)\b""",
        r"\b(?:aprueba|apruebe|aprobar)\w*\s+(?:\w+\s+){0,2}?automaticamente\b|\b(?:omite|omitir|salta|saltate|evita)\s+(?:la\s+)?(?:revision|aprobacion)\b|\bmarca(?:lo|la|r)?\s+como\s+(?:aprobad[oa]|revisad[oa])\b",
        r"\b(?:approuve|approuvez|approuver|valide|validez)\s+(?:\w+\s+){0,2}?automatiquement\b|\b(?:contourne|contournez|saute|sautez|ignore|ignorez|evite|evitez)\s+(?:la\s+|l')?(?:revision|relecture|validation|approbation)\b|\bmarque(?:z|r)?\s+(?:\w+\s+){0,2}comme\s+(?:approuve|valide)\b",
        r"\bautomatisch\s+(?:genehmig|freigeb|freigegeb|akzeptier)\w*|\b(?:uberspring|ueberspring|umgeh)\w*\s+(?:die\s+|jede\s+)?(?:prufung|pruefung|freigabe|genehmigung|uberprufung|ueberpruefung)\b|\bals\s+(?:genehmigt|gepruft|geprueft|freigegeben)\s+markier\w*",
        r"自动(?:批准|审批|通过)|自動(?:批准|審批|通過)|(?:跳过|跳過|绕过|繞過)(?:人工)?(?:审核|審核|审查|審查|批准)|标记为已(?:批准|审核)|標記為已(?:批准|審核)",
    ),
    _rule(
        "tool-call",
        r"""\b(?:call|invoke|use|trigger)\s+(?:the\s+|a\s+|your\s+)?\w*[_-]?(?:tool|function)\s*(?:call|named|\(|`|:)
            |\b(?:call|invoke)\s+the\s+\w+\s+(?:tool|function)\b
            |\b(?:tool|function)[_\s]call\b
            |\b(?:run|execute)\s+(?:the\s+following|this)\s+(?:shell\s+)?(?:command|script|code)\b""",
        # paraphrase: put this line or picture into the document
        r"""\b(?:insert|add|include|embed|append|put|paste)\s+(?:the\s+following|this|these)\s+
            (?:link|image|picture|pixel|url|line|lines|text|sentence|snippet|markdown|html)\b""",
        r"\b(?:llama|invoca|usa|ejecuta)\s+(?:a\s+)?(?:la\s+)?(?:herramienta|funcion)\b|\bejecuta\s+(?:el\s+siguiente|este)\s+(?:comando|script|codigo)\b|\b(?:inserta|anade|incluye)\s+(?:el\s+siguiente|la\s+siguiente|este|esta)\s+(?:enlace|imagen|texto|linea)\b",
        r"\b(?:appelle|appelez|invoque|invoquez|utilise|utilisez)\s+l'outil\b|\bexecute[rz]?\s+(?:la\s+commande|le\s+script|ce\s+code)\s+suivante?\b|\b(?:insere|inserez|ajoute|ajoutez)\s+(?:le\s+lien|l'image|le\s+texte|la\s+ligne)\s+suivante?\b",
        r"\b(?:rufe|ruf|verwende|nutze)\s+(?:das\s+)?(?:werkzeug|tool|funktion)\b|\bfuhre\s+(?:den\s+folgenden|diesen)\s+(?:befehl|code|skript)\b|\bfuge\s+(?:den\s+folgenden|das\s+folgende|diesen)\s+(?:link|bild|text)\b",
        r"(?:调用|調用)(?:以下|下面的?|这个|這個)?(?:工具|函数|函數)|(?:运行|運行|执行|執行)(?:以下|下面的?|这个|這個)(?:命令|脚本|腳本|代码|代碼)|(?:插入|添加|加入)(?:以下|下面的?)(?:链接|鏈接|图片|圖片|文字)",
    ),
    _rule(
        "capability-change",
        r"""\b(?:grant|give|expand|widen|extend|escalate|elevate|unlock|enable|add)\w*\s+(?:to\s+)?
            (?:yourself|(?:the|this)\s+(?:ai|assistant|agent|model|llm|bot)(?:'s)?)\s+(?:\w+\s+){0,2}?
            (?:capabilit\w*|permissions?|privileges?|access|tools?|rights)\b
            |\b(?:sudo|superuser|root\s+(?:access|privileges?))\b
            |\bcapabilit(?:y|ies)\s+(?:set|token|grant|list)\b""",
        r"""\b(?:concedete|otorgate|date|asignate)\s+(?:\w+\s+){0,2}?(?:permisos|privilegios|acceso|capacidades)\b
            |\b(?:concede|otorga|da)\s+(?:al|a\s+la)\s+(?:ia|asistente|agente|modelo)\s+(?:\w+\s+){0,2}?(?:permisos|privilegios|acceso)\b""",
        r"""\b(?:accorde|donne|octroie)-toi\s+(?:\w+\s+){0,2}?(?:permissions|privileges|droits|acces|capacites)\b
            |\b(?:accorde|donne|octroie|accordez|donnez)\s+a\s+l'(?:ia|assistant|agent)\s+(?:\w+\s+){0,2}?(?:permissions|privileges|droits|acces)\b""",
        r"\b(?:gib|gewahre|gewaehre|erteile)\s+(?:dir|dem\s+(?:assistenten|agenten|modell))\s+(?:selbst\s+)?(?:\w+\s+){0,2}?(?:rechte|berechtigungen|zugriff|privilegien)\b",
        r"(?:授予|给予|給予|赋予|賦予)(?:你自己|你|自己|助手|代理).{0,6}(?:权限|權限|特权|特權)|提升(?:你的|自己的)(?:权限|權限)",
    ),
    _rule(
        HIDDEN_CHARACTERS,
        "[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
        "\u3164\ufe00-\ufe0f\uffa0\U000e0000-\U000e007f]",
        taints_source=False,
    ),
)

__all__ = ["HIDDEN_CHARACTERS", "RULES", "Rule"]
