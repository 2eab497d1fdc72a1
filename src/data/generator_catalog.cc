// What the customer-service generator says: the intents with their core phrases in English and
// Chinese, the openers and suffixes around them, and the slot value generators. Everything a
// reader may want to tune lives here; generator.cc only combines it.
//
// Rules the phrases follow (generator_test checks the mechanical ones):
// - no two intents share a core phrase, and the words that decide an intent are in the core,
//   never in an opener or suffix (those are shared by all intents);
// - a core phrase names each slot at most once, and only slots listed for its intent;
// - colloquial and mixed-script wording is welcome ("where's my stuff", "order号", "app登不上").
#include <array>
#include <stdexcept>
#include <string>

#include "data/generator.h"

namespace shrike::data::gen_detail {

const std::vector<IntentPatterns>& intent_patterns() {
  static const std::vector<IntentPatterns> table = {
      {"order_status",
       {"order_id", "date"},
       {"[where's|where is|what's going on with|any update on] my order[| {order_id}]",
        "[can|could] you check [on|] order {order_id} for me",
        "[what's|what is] the status of [order {order_id}|my order]",
        "I placed an order {date:past} and [haven't heard anything|there's still no update|it "
        "still says processing]",
        "has my order[| {order_id}] shipped yet", "where's my stuff",
        "is order {order_id} [still processing|confirmed yet]"},
       {"我的订单[|{order_id}][现在什么状态|到哪一步了|怎么样了]",
        "帮我查[下|一下]订单{order_id}[的状态|发货了没]",
        "我{date:past}下的单[怎么还没动静|到现在还没消息|一直显示处理中]",
        "我买的东西[咋|怎么]还没发货", "order号{order_id}[现在啥情况|处理到哪了]",
        "订单[一直|还]显示待发货是怎么回事"}},
      {"track_package",
       {"tracking_number", "order_id"},
       {"[can|could] you track [my parcel|this shipment|tracking number {tracking_number}]",
        "my tracking number is {tracking_number}[, where is it now| but it hasn't updated| and it "
        "shows no movement]",
        "the tracking [info|page] [hasn't updated in days|says in transit forever|shows nothing]",
        "which courier is [delivering|carrying] [order {order_id}|my parcel]",
        "I need the tracking number for [order {order_id}|my order]",
        "where is parcel {tracking_number} right now"},
       {"帮我查[下|一下]快递单号{tracking_number}[到哪了|的物流]",
        "物流信息[好几天没更新了|一直不动|一直显示运输中]",
        "运单号{tracking_number}[怎么查不到|显示什么状态]",
        "订单{order_id}的快递单号[是多少|发我一下]", "是哪家快递[送的|在配送]",
        "我的快递[咋|怎么]还没到[|，到哪了]", "tracking号{tracking_number}查一下物流"}},
      {"delivery_time",
       {"order_id", "city", "date"},
       {"when will [my order|order {order_id}|it] [arrive|be delivered|get here]",
        "how long does [delivery|shipping] to {city} take",
        "will [it|my order] arrive by {date:future}",
        "what's the [estimated|expected] delivery date[| for order {order_id}]",
        "how many days until [I get it|it arrives]"},
       {"[订单{order_id}|我的订单|这个]什么时候能[到|送到|送达]", "发到{city}[要几天|大概多久能到]",
        "{date:future}之前能[到吗|送到吗]", "预计[几号|哪天]送达", "下单后多久[能收到|到货]"}},
      {"refund_request",
       {"order_id", "amount", "product"},
       {"I [want|need|would like] a refund for [order {order_id}|the {product}|my order]",
        "[please|] refund [me|] {amount}[| to my card]",
        "when will I get my [money|refund] back[| for order {order_id}]",
        "I haven't received the {amount} refund yet",
        "how do I get my money back for the {product}"},
       {"我要[退款|申请退款][|，订单{order_id}]", "{product}[能退款吗|可以退钱吗]",
        "退款{amount}[什么时候到账|怎么还没到账]", "把钱退给我[|，{amount}]",
        "订单{order_id}申请的退款[还没收到|多久能到]", "申请refund，order号{order_id}"}},
      {"cancel_order",
       {"order_id", "product"},
       {"[I want to|please|can you|I need to] cancel [my order|order {order_id}|the order for "
        "the {product}]",
        "I [changed my mind|ordered by mistake], cancel [it|order {order_id}]",
        "stop order {order_id} before it ships",
        "is it too late to cancel [my order|order {order_id}]"},
       {"[帮我|我要|麻烦]取消[订单|这个订单|订单{order_id}]",
        "{product}[拍错了|不要了]，[帮我取消|取消订单]",
        "订单{order_id}还没发货的话帮我取消[掉|一下]", "下错单了[，怎么取消|，能撤销吗]"}},
      {"change_address",
       {"order_id", "address", "city"},
       {"[I need to|can I|please] [change|update] the [shipping|delivery] address[| for order "
        "{order_id}| on my order]",
        "please [ship|send] it to {address} instead",
        "I moved to {city}[, can you update my address|, update the delivery address]",
        "wrong address on [my order|order {order_id}], it should be {address}"},
       {"[帮我|我想|能不能]改一下[收货地址|地址][|，订单{order_id}]", "地址填错了，改成{address}",
        "[请|麻烦]把收货地址换成{address}", "我搬到{city}了，[收货地址要改一下|地址帮我更新下]"}},
      {"request_invoice",
       {"order_id", "email"},
       {"[can I get|I need|please send me] [an invoice|a receipt|a VAT invoice] for [order "
        "{order_id}|my purchase]",
        "email the invoice to {email}[| please]",
        "where can I download the [invoice|receipt][| for order {order_id}]"},
       {"[我要|我需要|能帮我]开[发票|一张发票|电子发票]",
        "订单{order_id}[的发票怎么开|要开增值税发票]", "发票发到{email}[就行|吧]",
        "发票抬头[写错了|怎么改]"}},
      {"payment_failed",
       {"payment_method", "amount"},
       {"my [payment|card] [keeps getting declined|failed|didn't go through]",
        "I tried to pay with {payment_method} but it [failed|got declined|gave an error]",
        "[payment|checkout] [error|failed] when paying {amount}",
        "why was my {payment_method} [rejected|declined]",
        "I was charged {amount} but the order says payment failed"},
       {"[付款|支付]一直失败[怎么办|是怎么回事]", "用{payment_method}付不了[款|钱]",
        "{payment_method}[付款提示失败|付款报错了]", "付{amount}的时候显示支付失败",
        "钱扣了{amount}但是显示没付款成功"}},
      {"apply_coupon",
       {"coupon_code", "order_id"},
       {"how do I [use|apply|redeem] [a coupon|my promo code|the discount code {coupon_code}]",
        "the code {coupon_code} [isn't working|says invalid|won't apply]",
        "can you apply [coupon|promo code] {coupon_code} to [order {order_id}|my order]",
        "I forgot to use my coupon[| on order {order_id}]"},
       {"优惠券[怎么用|用不了|用不上]", "优惠码{coupon_code}[显示无效|用不了|提示已过期]",
        "帮我把{coupon_code}[用到|加到]订单{order_id}上", "下单忘了用券[|了][|，还能补吗]"}},
      {"return_item",
       {"product", "order_id"},
       {"I [want|would like|need] to return [the {product}|this item|my order {order_id}]",
        "how do I [send back|return] [the {product}|an item]",
        "what's your return policy[| for the {product}]",
        "can I [still|] return [it|the {product}][| after 30 days| if I opened it]",
        "I need a return label for order {order_id}"},
       {"[我想|我要|怎么]退货[|，订单{order_id}]", "{product}[能退吗|想退回去|怎么退]",
        "退货[地址是哪|要寄到哪里|运费谁出]", "七天无理由退货[怎么申请|还能用吗]",
        "订单{order_id}的{product}我要退"}},
      {"exchange_item",
       {"product", "order_id"},
       {"can I exchange [the {product}|this|it] for a [different size|different color|bigger "
        "one|smaller one]",
        "I'd like to swap [the {product}|my item] for [another color|a new one]",
        "the {product} doesn't fit, can I [exchange|swap] it",
        "how do exchanges work[| for order {order_id}]"},
       {"{product}[能换货吗|可以换个颜色吗|尺码不对想换]", "我想[换个尺码|换个颜色|换一个新的]",
        "订单{order_id}[申请换货|想换货]", "[换货|调换]要怎么操作"}},
      {"product_question",
       {"product"},
       {"does the {product} come with [a charger|batteries|a case]",
        "is the {product} [waterproof|machine washable|good for kids]",
        "what colors does the {product} come in", "tell me more about the {product}",
        "what's the difference between the {product} and the older model",
        "how [big|heavy] is the {product}"},
       {"{product}[是什么材质的|防水吗|有几种颜色|支持快充吗]",
        "[这款|]{product}[尺码偏大吗|适合小孩用吗]", "介绍一下{product}",
        "{product}和上一代有什么区别", "{product}的[参数|尺寸|重量]是多少"}},
      {"stock_check",
       {"product", "quantity", "city"},
       {"is the {product} [in stock|available|back in stock]",
        "do you have {quantity} of the {product} in stock",
        "when will the {product} be [restocked|back on the shelves]",
        "is it [available|in stock] at your {city} store",
        "[is|are] [the {product}|these] sold out"},
       {"{product}[有货吗|还有库存吗|什么时候补货]", "{product}还有{quantity}吗",
        "{city}[门店|的店]有{product}吗", "[这个|{product}]是不是卖完了",
        "[缺货|断货]的东西什么时候[到|能补上]"}},
      {"price_match",
       {"product", "amount"},
       {"[do you|can you] [price match|match a competitor's price]",
        "I found the {product} for {amount} [elsewhere|at another store|on Amazon]",
        "[can|will] you match {amount} for the {product}",
        "the price dropped[| to {amount}] right after I bought it, can I get the difference"},
       {"别家{product}[才卖|只要]{amount}[，能便宜点吗|，你们能保价吗]",
        "[你们|这边]支持[价保|保价]吗", "刚买完就降价到{amount}了[|，能退差价吗]",
        "[能不能|可以]按{amount}[给我算|的价格算]", "买贵了[，补差价吗|能退差价吗]"}},
      {"account_login",
       {"email", "phone"},
       {"I can't [log in|sign in|get into my account]",
        "my account [is locked|got locked|says invalid credentials]",
        "[login|sign in] [keeps failing|doesn't work] with {email}",
        "I'm not getting the [verification|login] code on {phone}"},
       {"[登录|登陆]不上[去|了][|，怎么办]", "账号被[锁了|冻结了]",
        "用{phone}[登录|登陆]一直提示[错误|失败]", "收不到[验证码|短信验证码][|，手机号{phone}]",
        "{email}这个账号[登不上|进不去]", "app[登录|登陆]不上"}},
      {"reset_password",
       {"email", "phone"},
       {"I forgot my password", "[how do I|please help me|I need to] reset my password",
        "send a password reset [link|email] to {email}",
        "the password reset [link|code] [isn't working|expired]",
        "change my password for the account [{email}|linked to {phone}]"},
       {"[忘记|忘了]密码[|了][|怎么办]", "[怎么|帮我]重置密码",
        "[密码重置|找回密码]的[链接|邮件]发到{email}", "[我想|帮我]改一下[登录|]密码",
        "找回密码收不到[短信|邮件]"}},
      {"update_phone",
       {"phone"},
       {"[I need to|please|can you] [update|change] my phone number[| to {phone}]",
        "my new [number|phone number|cell] is {phone}",
        "I got a new phone number, [it's {phone}|how do I update it]"},
       {"[帮我|我要|想]换[绑|]手机号[|，新号码{phone}]", "我的新号码是{phone}",
        "手机号换了[，改成{phone}|，怎么修改]", "绑定的手机[不用了|停机了][|，要换成{phone}]"}},
      {"update_email",
       {"email"},
       {"[I need to|please|can you] [update|change] my email[| address][| to {email}]",
        "my new email is {email}", "send [updates|everything] to {email} [from now on|instead]",
        "I no longer use my old email[|, use {email}]"},
       {"[帮我|我想|要][改|换]一下[邮箱|绑定邮箱][|，新邮箱{email}]", "邮箱换成{email}",
        "以后[发到|联系]{email}[这个邮箱|]", "旧邮箱不用了[|，新的是{email}]"}},
      {"complaint",
       {"order_id", "product"},
       {"I want to [file|make] a complaint[| about order {order_id}]",
        "your [service|customer service|delivery service] is [terrible|awful|a joke]",
        "this is [unacceptable|ridiculous], I've been transferred five times",
        "[very|really|extremely] disappointed with the {product}",
        "the courier was [rude|really rude to me]"},
       {"我要[投诉|举报][|，订单{order_id}]", "你们[服务|客服|态度]太[差|烂]了",
        "[快递员|配送员]态度[太差|很恶劣]", "[对{product}|]非常不满意",
        "[太离谱了|简直是坑人]，[我要差评|必须给个说法]"}},
      {"talk_to_human",
       {"phone", "time"},
       {"[can I|let me|I want to] [talk|speak] to a [real person|human|live agent]",
        "[transfer me to|get me] [an agent|a human|your manager]",
        "[please|] have someone call me [at {phone}|back][| at {time}]",
        "stop the bot[|, I need a person]", "is there a human [I can talk to|available]"},
       {"[转|转接]人工[客服|]", "[我要|我想]找[真人|人工|你们经理]",
        "[让|请]客服[打我电话|回个电话][|，号码{phone}]",
        "{time}[给我回个电话|打给我][|，号码{phone}]", "别让机器人回了，[我要人工|找个真人]"}},
      {"missing_item",
       {"product", "order_id", "quantity"},
       {"[my|the] {product} was missing from [the box|my package|order {order_id}]",
        "I only got {quantity} items but ordered more",
        "[something is|one item is] missing from [my order|order {order_id}]",
        "the package came without the {product}"},
       {"[少发了|漏发了|少了]{product}", "订单{order_id}[少了一件|缺了东西]",
        "我买了{quantity}[只到了一件|，少了一个]", "包裹里[没有|找不到]{product}",
        "[东西|货]没发全"}},
      {"damaged_item",
       {"product", "order_id"},
       {"the {product} arrived [broken|damaged|cracked|smashed]",
        "the package was [crushed|soaking wet] and the {product} is damaged",
        "[order {order_id}|my order] came [damaged|broken]",
        "the {product} [doesn't turn on|is scratched|has a dent] out of the box"},
       {"{product}[收到就是坏的|屏幕碎了|摔坏了|有裂痕]", "[快递|包裹]被压烂了[|，东西也坏了]",
        "订单{order_id}[收到时破损了|的货有损坏]", "[刚拆开|一打开]{product}就[坏了|开不了机]"}},
      {"wrong_item",
       {"product", "order_id"},
       {"I [got|received] the wrong [item|size|color]",
        "I ordered the {product} but got [something else|a different item]",
        "[this|that] isn't what I ordered", "you sent me the {product} [by mistake|instead]",
        "order {order_id} has the wrong [item|product] in it"},
       {"[发错货了|发错了|寄错东西了]", "我买的是{product}[，收到的不是|，你们发成别的了]",
        "[颜色|尺码|型号]发错了", "订单{order_id}[发的不是我买的|货不对版]",
        "收到的是{product}，[根本不是我下单的|我没买这个]"}},
      {"change_payment_method",
       {"payment_method", "order_id"},
       {"can I [pay with|switch to] {payment_method} instead",
        "[I want to|how do I] change [my payment method|the card on file|how I pay]",
        "update the payment [for order {order_id}|on my order] to {payment_method}",
        "remove my old card and add {payment_method}"},
       {"[能|可以]改用{payment_method}[付款|支付]吗",
        "[怎么|我想]换[支付方式|付款方式|绑定的银行卡]",
        "订单{order_id}[的支付方式|]改成{payment_method}",
        "不想用{payment_method}了，[换一种|换别的付]"}},
      {"shipping_cost",
       {"city", "product"},
       {"how much is shipping[| to {city}| for the {product}]",
        "do you offer free shipping[| to {city}]", "is shipping free for the {product}",
        "what are the delivery [fees|charges][| to {city}]",
        "why is the shipping [so expensive|fee so high]"},
       {"[寄到|发到|送到]{city}[运费多少|要运费吗|包邮吗]", "{product}[包邮吗|运费怎么算]",
        "运费[怎么这么贵|是多少]", "满多少[包邮|免运费]"}},
      {"order_modify_quantity",
       {"quantity", "product", "order_id"},
       {"[can I|I want to|please] change the quantity[| to {quantity}| of the {product}| on "
        "order {order_id}]",
        "add {quantity} more [to my order|of the {product}]",
        "I only want {quantity}[| of the {product}], not that many",
        "reduce [the {product}|my order {order_id}] to {quantity}"},
       {"[帮我|我想]把数量改成{quantity}", "{product}[再加|多要]{quantity}",
        "订单{order_id}[买多了|数量错了]，[改成|只要]{quantity}",
        "[能不能|可以]修改订单[里的数量|数量]"}},
      {"membership",
       {"email"},
       {"what are the benefits of [membership|your membership|the VIP plan]",
        "how do I [become|sign up as] a member", "when does my membership expire",
        "is my membership still active", "how many reward points do I have",
        "check my member points", "sign me up for [membership|the loyalty program] with {email}"},
       {"[会员|VIP]有什么[权益|好处]", "怎么[开通|办|加入]会员", "我的会员[什么时候到期|还有效吗]",
        "[查一下我的|我有多少]积分", "用{email}[注册会员|开个会员]"}},
      {"gift_card_balance",
       {"amount"},
       {"[how much is left on|check the balance of|what's the balance on] my gift card",
        "I have a {amount} gift card, [how much is left|is it still valid]",
        "[can I|how do I] check my gift card balance",
        "my gift card [shows zero|says {amount}] but I haven't used it"},
       {"[礼品卡|购物卡][还剩多少钱|余额多少|余额怎么查]",
        "我有张{amount}的[礼品卡|购物卡][，还能用吗|，余额多少]", "查[一下|下]礼品卡余额",
        "礼品卡[显示余额为零|只剩{amount}了]，[我没用过啊|怎么回事]"}},
      {"store_hours",
       {"city", "date", "time"},
       {"what time [do you|does the store] [open|close][| {date:future}]",
        "[are you|is the {city} store] open [{date:future}|right now]",
        "what are your [store|opening|business] hours[| in {city}]",
        "are you still open at {time}"},
       {"[门店|你们店]几点[开门|关门]", "{city}的店[营业时间是几点|几点关门]",
        "{date:future}[营业吗|开门吗]", "{time}还营业吗", "[周末|节假日]营业吗"}},
      {"store_location",
       {"city", "address"},
       {"where is your [nearest|closest] store[| in {city}]",
        "do you have a [store|shop|location] in {city}",
        "what's the address of the {city} [store|branch]", "is there a store near {address}"},
       {"{city}[有门店吗|有实体店吗]", "[最近的|附近的]门店在哪",
        "{city}的店[地址在哪|具体在哪个位置]", "{address}附近有[你们的店|门店]吗"}},
      {"cancel_subscription",
       {"email", "date"},
       {"[I want to|please|how do I] cancel my subscription",
        "stop [my monthly box|the auto-renewal]",
        "[don't|do not] renew my [plan|subscription][| after {date:future}]",
        "unsubscribe [me|{email}] from the [monthly plan|subscription]"},
       {"[取消|退订|关闭]自动续费", "[我要|帮我]退订[订阅服务|月度订阅]",
        "{date:future}之后不要再续费了", "{email}的订阅[帮我取消|不要了]"}},
      {"warranty",
       {"product", "date"},
       {"is the {product} [still|] under warranty",
        "how long is the warranty [on|for] the {product}",
        "I bought [it|the {product}] {date:past}, can I [get it repaired|use the warranty]",
        "how do I make a warranty claim[| for the {product}]"},
       {"{product}[保修多久|保修期多长|还在保修期内吗]", "[怎么|如何]申请保修",
        "{date:past}买的{product}[坏了能保修吗|还能保修吗]", "[保修|质保]怎么[算|走流程]"}},
      {"greeting",
       {"name"},
       {"[hi|hello|hey] [there|everyone|]", "is anyone [there|available|online]",
        "[good morning|good afternoon|good evening]", "[hi|hello], [this is|my name is|I'm] {name}",
        "hello, can you hear me"},
       {"[你好|您好|哈喽|嗨][|呀|啊]", "[在吗|有人吗|有人在吗]", "[有没有|还有没有]人在",
        "[早上好|下午好|晚上好][|呀]", "[你好|您好]，我[是|叫]{name}", "客服[你好|您好|在不在]"},
       Frame::plain_suffixes},
      {"goodbye",
       {"name"},
       {"[thanks|thank you] for your help", "that's all I needed[|, bye|, have a good day]",
        "[ok|great|perfect], [bye|goodbye|see you]",
        "thanks {name}, [you've been very helpful|that solved it]",
        "[problem solved|all good now], [cheers|thanks again]",
        "that's everything, [thanks|thank you|bye]", "[thanks|thank you] so much[|, bye]",
        "have a [nice|great|good] [day|evening]"},
       {"[好的|好嘞|ok|嗯嗯]，[谢谢|多谢|感谢|谢啦]",
        "[没别的问题了|没事了|解决了|搞定了]，[再见|拜拜]", "谢谢{name}，[帮大忙了|辛苦了]",
        "[拜拜|再见][啦|]", "[那就这样吧|那先这样]，[谢谢|拜拜]"},
       Frame::plain},
      {"reschedule_delivery",
       {"date", "time", "order_id"},
       {"can you deliver [it|order {order_id}] {date:future} instead",
        "I won't be home [{date:future}|that day], can we reschedule the delivery",
        "[please|] deliver [after|before] {time}",
        "reschedule [my delivery|the delivery for order {order_id}] to {date:future}"},
       {"[能不能|可以]改到{date:future}[送|配送]", "{date:future}家里没人，[晚点送|改天送]",
        "[麻烦|请]{time}[以后|之前]送", "订单{order_id}[改个时间送|延迟配送]"}},
      {"unauthorized_charge",
       {"amount", "payment_method", "order_id"},
       {"there's a charge of {amount} [I don't recognize|I never made]",
        "I didn't [place|make] [this order|order {order_id}]",
        "someone used my {payment_method} [without permission|on your site]",
        "[I think|] my account was hacked"},
       {"有一笔{amount}的扣款[不是我买的|我不认识]", "订单{order_id}不是我下的",
        "[我的账号|账号][被盗了|被别人登了]", "有人盗刷我的{payment_method}"}},
  };
  return table;
}

const std::vector<const char*>& slot_types() {
  static const std::vector<const char*> names = {
      "order_id",    "amount",         "date",  "phone", "product",
      "quantity",    "address",        "email", "city",  "tracking_number",
      "coupon_code", "payment_method", "time",  "name"};
  return names;
}

// The first kPlainOpeners / kPlainSuffixes entries fit any utterance, small talk included; the
// rest belong in front of or after a request.
// clang-format off
const std::vector<const char*>& openers(Lang lang) {
  static const std::vector<const char*> en = {
      "", "um, ", "so ", "ok so ", "listen, ",
      "hi, ", "hello, ", "hey, ", "hi there, ", "hey there! ", "excuse me, ", "quick question: ",
      "good morning, ", "sorry to bother you, ", "hi team, ", "hello support, ", "yo, ",
      "hi, sorry, ", "help! ", "hello? "};
  static const std::vector<const char*> zh = {
      "", "嗯，", "那个，", "亲，", "哦，",
      "你好，", "您好，", "在吗？", "客服你好，", "哈喽，", "请问", "麻烦问一下，", "不好意思，",
      "打扰一下，", "喂，", "hi，", "客服在吗？", "亲在吗，", "我想问下，", "急！", "问一下，"};
  return lang == Lang::en ? en : zh;
}

const std::vector<const char*>& suffixes(Lang lang) {
  static const std::vector<const char*> en = {
      "", ".", "!", "!!", " :)",
      "?", " please", ", please help", ", thanks", ", thank you", " asap", ", it's urgent",
      ". any help is appreciated", ", thanks in advance", ". cheers", ", appreciate it",
      " as soon as possible"};
  static const std::vector<const char*> zh = {
      "", "。", "！", "～", "！！",
      "？", "，谢谢", "，谢谢啦", "，麻烦了", "，急", "，急用", "，快点", "，在线等", "，辛苦了",
      "，多谢", "，拜托了", "，谢了"};
  return lang == Lang::en ? en : zh;
}
// clang-format on

namespace {

std::string digits(Rng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>('0' + rng.below(10));
  return s;
}

// Upper-case letters and digits without the easily confused O/0 and I/1.
std::string code_chars(Rng& rng, int n) {
  static const char kChars[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
  std::string s;
  for (int i = 0; i < n; ++i) s += kChars[rng.below(sizeof(kChars) - 1)];
  return s;
}

int64_t in_range(Rng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
}

std::string str(int64_t v) {
  return std::to_string(v);
}

// 1..99999 in Chinese numerals as people say them: 12 -> 十二, 105 -> 一百零五, 200 -> 两百.
std::string chinese_number(int64_t n) {
  static const char* kDigit[] = {"零", "一", "二", "三", "四", "五", "六", "七", "八", "九"};
  static const char* kUnit[] = {"", "十", "百", "千", "万"};
  if (n >= 10 && n < 20) return std::string("十") + (n == 10 ? "" : kDigit[n % 10]);
  std::array<int, 5> d{};
  int top = 0;
  for (int i = 0; i < 5; ++i) {
    d[i] = static_cast<int>(n % 10);
    n /= 10;
    if (d[i] != 0) top = i;
  }
  std::string out;
  bool pending_zero = false;
  for (int i = top; i >= 0; --i) {
    if (d[i] == 0) {
      pending_zero = !out.empty();
      continue;
    }
    if (pending_zero) out += "零";
    pending_zero = false;
    // "两" before 百/千/万 when leading, the way amounts and counts are spoken.
    out += (d[i] == 2 && i >= 2 && i == top) ? "两" : kDigit[d[i]];
    out += kUnit[i];
  }
  return out;
}

std::string price(Rng& rng, int64_t lo, int64_t hi) {
  const int64_t whole = in_range(rng, lo, hi);
  static const std::vector<const char*> cents = {"", "", ".99", ".49", ".50", ".95", ".00"};
  return str(whole) + rng.pick(cents);
}

std::string order_id(Rng& rng, Lang lang) {
  switch (rng.below(lang == Lang::zh ? 6 : 5)) {
    case 0:
      return "SO" + str(in_range(rng, 2022, 2026)) + digits(rng, 7);
    case 1:
      return "#" + code_chars(rng, 6);
    case 2:
      return digits(rng, 3) + "-" + digits(rng, 7) + "-" + digits(rng, 7);
    case 3:
      return "ORD-" + digits(rng, 6);
    case 4:
      return "JD" + digits(rng, 12);
    default:
      return str(in_range(rng, 1, 9)) + digits(rng, 17);  // Taobao-style 18 digits
  }
}

std::string tracking_number(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    switch (rng.below(4)) {
      case 0:
        return "1Z" + code_chars(rng, 6) + digits(rng, 10);
      case 1:
        return "TBA" + digits(rng, 12);
      case 2:
        return "9400" + digits(rng, 18);
      default:
        return "SF" + digits(rng, 12);
    }
  }
  switch (rng.below(5)) {
    case 0:
      return "SF" + digits(rng, 12);
    case 1:
      return "YT" + digits(rng, 13);
    case 2:
      return "JT" + digits(rng, 13);
    case 3:
      return "75" + digits(rng, 12);
    default:
      return "JDX" + digits(rng, 12);
  }
}

std::string amount(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    switch (rng.below(6)) {
      case 0:
      case 1:
        return "$" + price(rng, 5, 499);
      case 2:
        return str(in_range(rng, 5, 300)) + " dollars";
      case 3:
        return str(in_range(rng, 5, 200)) + " bucks";
      case 4:
        return "€" + price(rng, 5, 300);
      default:
        return "$1," + digits(rng, 3);
    }
  }
  const int64_t n = in_range(rng, 5, 999);
  switch (rng.below(7)) {
    case 0:
      return str(n) + "元";
    case 1:
      return "¥" + price(rng, 5, 999);
    case 2:
      return str(n) + "块";
    case 3:
      return str(n) + "块钱";
    case 4:
      return chinese_number(n) + "块";
    case 5:
      return chinese_number(in_range(rng, 1, 20) * 10) + "元";
    default:
      return price(rng, 5, 500) + "元";
  }
}

std::string date(Rng& rng, std::string_view flavour, Lang lang) {
  const bool past = flavour == "past";
  const bool future = flavour == "future";
  const int64_t month = in_range(rng, 1, 12);
  const int64_t day = in_range(rng, 1, 28);
  const int64_t year = past ? in_range(rng, 2024, 2025) : in_range(rng, 2025, 2026);
  auto two = [](int64_t v) { return (v < 10 ? "0" : "") + str(v); };
  if (lang == Lang::en) {
    static const std::vector<const char*> weekday = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                     "Friday", "Saturday", "Sunday"};
    static const std::vector<const char*> months = {
        "January", "February", "March",     "April",   "May",      "June",
        "July",    "August",   "September", "October", "November", "December"};
    static const std::vector<const char*> past_words = {"yesterday", "last week", "two days ago",
                                                        "a week ago", "last month"};
    static const std::vector<const char*> future_words = {"tomorrow", "today", "this weekend",
                                                          "the day after tomorrow"};
    const std::string m = months[month - 1];
    const char* th = (day % 10 == 1 && day != 11)   ? "st"
                     : (day % 10 == 2 && day != 12) ? "nd"
                     : (day % 10 == 3 && day != 13) ? "rd"
                                                    : "th";
    switch (rng.below(6)) {
      case 0:
        return past ? rng.pick(past_words) : future ? rng.pick(future_words) : "today";
      case 1:
        return (past ? "last " : "next ") + std::string(rng.pick(weekday));
      case 2:
        return m + " " + str(day);
      case 3:
        return m.substr(0, 3) + " " + str(day) + th;
      case 4:
        return str(year) + "-" + two(month) + "-" + two(day);
      default:
        return two(month) + "/" + two(day);
    }
  }
  static const std::vector<const char*> weekday = {"一", "二", "三", "四", "五", "六", "日"};
  static const std::vector<const char*> past_words = {"昨天", "前天", "上个月", "上周末", "3天前"};
  static const std::vector<const char*> future_words = {"明天", "后天", "今天", "这周末", "月底"};
  switch (rng.below(6)) {
    case 0:
      return past ? rng.pick(past_words) : future ? rng.pick(future_words) : "今天";
    case 1:
      return (past ? "上周" : "下周") + std::string(rng.pick(weekday));
    case 2:
      return str(month) + "月" + str(day) + "日";
    case 3:
      return str(month) + "月" + str(day) + "号";
    case 4:
      return str(year) + "-" + two(month) + "-" + two(day);
    default:
      return str(year) + "年" + str(month) + "月" + str(day) + "日";
  }
}

std::string phone(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    const std::string area = str(in_range(rng, 201, 989));
    switch (rng.below(4)) {
      case 0:
        return "(" + area + ") 555-" + digits(rng, 4);
      case 1:
        return area + "-555-" + digits(rng, 4);
      case 2:
        return "+1 " + area + " 555 " + digits(rng, 4);
      default:
        return "07700 9" + digits(rng, 5);
    }
  }
  static const std::vector<const char*> prefix = {"138", "139", "137", "150", "151",
                                                  "186", "188", "135", "177", "199"};
  const std::string p = rng.pick(prefix);
  const std::string a = digits(rng, 4), b = digits(rng, 4);
  switch (rng.below(4)) {
    case 0:
      return p + a + b;
    case 1:
      return p + " " + a + " " + b;
    case 2:
      return "+86 " + p + "-" + a + "-" + b;
    default:
      return p + "-" + a + "-" + b;
  }
}

std::string product(Rng& rng, Lang lang) {
  // clang-format off
  static const std::vector<const char*> en = {
      "iPhone 15 case", "AirPods Pro", "wireless mouse", "Nike hoodie", "Nintendo Switch",
      "yoga mat", "coffee maker", "Kindle Paperwhite", "Bluetooth speaker", "winter jacket",
      "phone charger", "USB-C cable", "desk lamp", "hiking backpack", "air fryer", "4K monitor",
      "mechanical keyboard", "Samsung Galaxy S24", "electric toothbrush", "smart watch", "blender",
      "gaming chair", "denim jacket", "rice cooker", "water bottle", "LEGO set", "iPad Air",
      "gaming headset", "vacuum cleaner", "sun hat"};
  // clang-format on
  static const std::vector<const char*> zh = {
      "iPhone 15 手机壳", "AirPods",    "蓝牙耳机", "电饭煲",        "羽绒服",      "运动鞋",
      "小米手环",         "扫地机器人", "保温杯",   "连衣裙",        "华为Mate 60", "机械键盘",
      "充电宝",           "空气炸锅",   "洗发水",   "Switch 游戏机", "显示器",      "儿童书包",
      "Type-C 数据线",    "护肤套装",   "iPad",     "电动牙刷",      "猫粮",        "Nike 跑鞋",
      "加湿器",           "戴森吹风机", "牛仔裤",   "零食大礼包",    "台灯",        "行李箱"};
  return rng.pick(lang == Lang::en ? en : zh);
}

std::string quantity(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    static const std::vector<const char*> words = {"two", "three", "four",     "five",
                                                   "six", "ten",   "a couple", "a dozen"};
    return rng.chance(0.5) ? str(in_range(rng, 2, 12)) : std::string(rng.pick(words));
  }
  static const std::vector<const char*> measure = {"件", "个", "份"};
  const int64_t n = in_range(rng, 2, 10);
  switch (rng.below(3)) {
    case 0:
      return str(n) + rng.pick(measure);
    case 1:
      return chinese_number(n) == "二" ? std::string("两") + rng.pick(measure)
                                       : chinese_number(n) + rng.pick(measure);
    default:
      return str(n);
  }
}

std::string address(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    static const std::vector<const char*> street = {"Main",  "Oak",  "Maple",      "Pine",
                                                    "Cedar", "Elm",  "Washington", "Lake",
                                                    "Hill",  "Park", "Sunset",     "Market"};
    static const std::vector<const char*> type = {"St",   "Street", "Ave",  "Avenue", "Rd",
                                                  "Road", "Blvd",   "Lane", "Drive"};
    std::string a = str(in_range(rng, 1, 9999)) + " " + rng.pick(street) + " " + rng.pick(type);
    switch (rng.below(3)) {
      case 0:
        return a + ", Apt " + str(in_range(rng, 1, 30)) + code_chars(rng, 1);
      case 1:
        return a + ", Unit " + str(in_range(rng, 1, 400));
      default:
        return a;
    }
  }
  static const std::vector<std::array<const char*, 3>> place = {
      {"北京市", "朝阳区", "建国路"},     {"北京市", "海淀区", "中关村大街"},
      {"上海市", "浦东新区", "世纪大道"}, {"上海市", "徐汇区", "淮海中路"},
      {"广州市", "天河区", "体育西路"},   {"深圳市", "南山区", "科技园路"},
      {"杭州市", "西湖区", "文一西路"},   {"成都市", "武侯区", "天府大道"},
      {"武汉市", "洪山区", "珞喻路"},     {"南京市", "鼓楼区", "中山路"}};
  static const std::vector<const char*> unit = {"", "3栋502", "A座1201室", "5楼", "2单元301"};
  const auto& p = rng.pick(place);
  std::string a = rng.chance(0.6) ? std::string(p[0]) : "";
  return a + p[1] + p[2] + str(in_range(rng, 1, 999)) + "号" + rng.pick(unit);
}

std::string email(Rng& rng, Lang lang) {
  static const std::vector<const char*> en_names = {"jenny", "tom",   "alex", "sarah", "mike",
                                                    "emma",  "david", "lisa", "kevin", "olivia"};
  static const std::vector<const char*> en_last = {"smith",  "li",     "brown",
                                                   "garcia", "nguyen", "miller"};
  static const std::vector<const char*> en_domain = {"gmail.com", "outlook.com", "yahoo.com",
                                                     "icloud.com", "hotmail.com"};
  static const std::vector<const char*> zh_names = {"wangwei",  "zhangli", "liuyang", "chenjing",
                                                    "xiaoming", "lina",    "zhaolei", "sunyue"};
  static const std::vector<const char*> zh_domain = {"163.com", "126.com", "sina.com", "gmail.com",
                                                     "foxmail.com"};
  if (lang == Lang::zh) {
    if (rng.chance(0.35)) return str(in_range(rng, 10000000, 2999999999)) + "@qq.com";
    return rng.pick(zh_names) + (rng.chance(0.5) ? str(in_range(rng, 1, 2024)) : "") + "@" +
           rng.pick(zh_domain);
  }
  const std::string first = rng.pick(en_names), last = rng.pick(en_last);
  switch (rng.below(3)) {
    case 0:
      return first + "." + last + "@" + rng.pick(en_domain);
    case 1:
      return first + str(in_range(rng, 1, 99)) + "@" + rng.pick(en_domain);
    default:
      return first.substr(0, 1) + "_" + last + "@" + rng.pick(en_domain);
  }
}

std::string city(Rng& rng, Lang lang) {
  static const std::vector<const char*> en = {"New York", "Los Angeles",   "Chicago", "Houston",
                                              "Seattle",  "Boston",        "Austin",  "Denver",
                                              "Miami",    "San Francisco", "Toronto", "Vancouver",
                                              "London",   "Manchester",    "Sydney",  "Dallas"};
  static const std::vector<const char*> zh = {"北京", "上海", "广州", "深圳", "杭州", "成都",
                                              "武汉", "南京", "西安", "重庆", "苏州", "天津",
                                              "长沙", "厦门", "青岛", "郑州", "香港"};
  return rng.pick(lang == Lang::en ? en : zh);
}

std::string coupon_code(Rng& rng) {
  static const std::vector<const char*> word = {
      "SAVE", "WELCOME", "VIP", "SPRING", "SUMMER", "FLASH", "NEW", "BIRTHDAY", "EXTRA", "HOLIDAY"};
  switch (rng.below(4)) {
    case 0:
      return rng.pick(word) + str(in_range(rng, 1, 10) * 5);
    case 1:
      return std::string(rng.pick(word)) + "-" + str(in_range(rng, 1, 10) * 5);
    case 2:
      return "FREESHIP" + str(in_range(rng, 1, 99));
    default:
      return code_chars(rng, 8);
  }
}

std::string payment_method(Rng& rng, Lang lang) {
  static const std::vector<const char*> en = {
      "PayPal",     "Visa",      "Mastercard", "Amex",  "credit card",
      "debit card", "Apple Pay", "Google Pay", "Venmo", "Klarna"};
  static const std::vector<const char*> zh = {"支付宝",         "微信支付", "银行卡",    "信用卡",
                                              "花呗",           "云闪付",   "Apple Pay", "京东白条",
                                              "招商银行信用卡", "PayPal"};
  if (lang == Lang::en && rng.chance(0.15)) return "Visa ending in " + digits(rng, 4);
  return rng.pick(lang == Lang::en ? en : zh);
}

std::string time_of_day(Rng& rng, Lang lang) {
  if (lang == Lang::en) {
    const int64_t h = in_range(rng, 1, 11);
    switch (rng.below(6)) {
      case 0:
        return str(h) + "pm";
      case 1:
        return str(h) + " am";
      case 2:
        return str(h) + ":" + str(in_range(rng, 1, 5)) + "0 " + (rng.chance(0.5) ? "am" : "pm");
      case 3:
        return str(in_range(rng, 12, 21)) + ":" + str(in_range(rng, 0, 5)) + "0";
      case 4:
        return rng.chance(0.5) ? "noon" : "midnight";
      default:
        return str(h) + " o'clock";
    }
  }
  static const std::vector<const char*> part = {"上午", "下午", "晚上", "早上", "中午", "傍晚"};
  const int64_t h = in_range(rng, 1, 11);
  switch (rng.below(4)) {
    case 0:
      return rng.pick(part) + str(h) + "点";
    case 1:
      return rng.pick(part) + (h == 2 ? std::string("两") : chinese_number(h)) + "点";
    case 2:
      return rng.pick(part) + str(h) + "点半";
    default:
      return str(in_range(rng, 8, 21)) + ":" + str(in_range(rng, 0, 5)) + "0";
  }
}

std::string person_name(Rng& rng, Lang lang) {
  static const std::vector<const char*> first = {"John",   "Emily", "Maria", "James", "Sophie",
                                                 "Daniel", "Priya", "Chris", "Anna",  "Omar"};
  static const std::vector<const char*> last = {"Smith",   "Garcia", "Chen",
                                                "Johnson", "Patel",  "Brown"};
  static const std::vector<const char*> surname = {"张", "王", "李", "刘", "陈", "杨", "赵", "黄"};
  static const std::vector<const char*> given = {"伟", "娜",   "小明", "静",
                                                 "洋", "晓东", "芳",   "磊"};
  if (lang == Lang::en)
    return rng.chance(0.5) ? std::string(rng.pick(first))
                           : rng.pick(first) + std::string(" ") + rng.pick(last);
  return std::string(rng.pick(surname)) + rng.pick(given);
}

}  // namespace

std::string slot_value(std::string_view slot, std::string_view flavour, Lang lang, Rng& rng) {
  if (slot == "order_id") return order_id(rng, lang);
  if (slot == "amount") return amount(rng, lang);
  if (slot == "date") return date(rng, flavour, lang);
  if (slot == "phone") return phone(rng, lang);
  if (slot == "product") return product(rng, lang);
  if (slot == "quantity") return quantity(rng, lang);
  if (slot == "address") return address(rng, lang);
  if (slot == "email") return email(rng, lang);
  if (slot == "city") return city(rng, lang);
  if (slot == "tracking_number") return tracking_number(rng, lang);
  if (slot == "coupon_code") return coupon_code(rng);
  if (slot == "payment_method") return payment_method(rng, lang);
  if (slot == "time") return time_of_day(rng, lang);
  if (slot == "name") return person_name(rng, lang);
  throw std::logic_error("generator catalog: unknown slot '" + std::string(slot) + "'");
}

}  // namespace shrike::data::gen_detail
